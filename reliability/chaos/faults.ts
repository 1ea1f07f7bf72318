// The faults of the chaos run, injected on a seeded schedule. Each fault heals itself (a
// restart, a SIGCONT, a link that comes back); a target under a fault is not picked again
// until it has healed, and at least one Pinboard is up at any time.
import { Redis } from "ioredis"
import { startRedisServer } from "../../test/support/RedisServer.js"
import type { ChaosFleet, Restartable } from "./fleet.js"
import type { Rng } from "../prng.js"

export const FAULT_KINDS = [
  "worker SIGKILL",
  "worker SIGSTOP past its lease",
  "Redis FLUSHALL",
  "Redis killed, restarted empty",
  "Pinboard killed, restarted",
  "heartbeats dropped",
  "worker port closed"
] as const
export type FaultKind = (typeof FAULT_KINDS)[number]

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const signal = (proc: Restartable, name: NodeJS.Signals) => {
  try {
    process.kill(proc.current.pid, name)
  } catch {
    // gone already
  }
}

export interface Injector {
  /** Starts one fault if a target is free; its kind, or undefined when none could start. */
  readonly inject: () => FaultKind | undefined
  /** Resolves once every fault started has healed. */
  readonly healed: () => Promise<void>
}

export const makeInjector = (fleet: ChaosFleet, leaseMs: number, rng: Rng, log: (line: string) => void): Injector => {
  const busy = new Set<string>()
  const healing = new Set<Promise<void>>()

  const run = (target: string, fault: () => Promise<void>) => {
    busy.add(target)
    const healed = fault()
      .catch((error: unknown) => log(`fault on ${target} failed to heal: ${error instanceof Error ? error.message : String(error)}`))
      .finally(() => {
        busy.delete(target)
        healing.delete(healed)
      })
    healing.add(healed)
  }

  const freeWorkers = () => fleet.workers.filter((w) => !busy.has(w.name))
  // Keep two workers untouched, so that ids always have somewhere to go.
  const workerFaultAllowed = () => fleet.workers.length - freeWorkers().length < fleet.workers.length - 2

  const attempt = (kind: FaultKind): boolean => {
    switch (kind) {
      case "worker SIGKILL":
      case "worker SIGSTOP past its lease":
      case "heartbeats dropped":
      case "worker port closed": {
        const candidates = freeWorkers()
        if (candidates.length === 0 || !workerFaultAllowed()) return false
        const worker = rng.pick(candidates)
        const downMs = rng.range(300, 1000)
        const pastLeaseMs = leaseMs + rng.range(300, 800)
        if (kind === "worker SIGKILL") {
          run(worker.name, async () => {
            signal(worker, "SIGKILL")
            await worker.current.exited
            await sleep(downMs)
            await worker.start()
          })
        } else if (kind === "worker SIGSTOP past its lease") {
          run(worker.name, async () => {
            signal(worker, "SIGSTOP")
            await sleep(pastLeaseMs)
            signal(worker, "SIGCONT")
          })
        } else if (kind === "heartbeats dropped") {
          run(worker.name, async () => {
            worker.link.cut(pastLeaseMs)
            await sleep(pastLeaseMs)
          })
        } else {
          run(worker.name, async () => {
            signal(worker, "SIGUSR1")
            await sleep(1600)
          })
        }
        return true
      }
      case "Redis FLUSHALL":
      case "Redis killed, restarted empty": {
        if (busy.has("redis")) return false
        if (kind === "Redis FLUSHALL") {
          run("redis", async () => {
            const client = new Redis(fleet.registry.port, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 1 })
            try {
              await client.connect()
              await client.flushall()
            } finally {
              client.disconnect()
            }
          })
        } else {
          const downMs = rng.range(200, 800)
          run("redis", async () => {
            await fleet.registry.stop()
            await sleep(downMs)
            fleet.registry = await startRedisServer(fleet.registryPort)
          })
        }
        return true
      }
      case "Pinboard killed, restarted": {
        if (fleet.pinboards.some((p) => busy.has(p.name))) return false
        const pinboard = rng.pick(fleet.pinboards)
        run(pinboard.name, async () => {
          signal(pinboard, "SIGKILL")
          await pinboard.current.exited
          await pinboard.start()
        })
        return true
      }
    }
  }

  return {
    inject: () => {
      const kind = rng.pick(FAULT_KINDS)
      return attempt(kind) ? kind : undefined
    },
    healed: async () => {
      while (healing.size > 0) await Promise.all([...healing])
    }
  }
}
