// The faults of the chaos run, injected on a seeded schedule. Each fault heals itself (a
// restart, a SIGCONT, a link that comes back, a replica promoted); a target under a fault is
// not picked again until it has healed, and at least one Pinboard is up at any time.
import { Redis } from "ioredis"
import { startRedisServer } from "../../test/support/RedisServer.js"
import type { ChaosFleet, ClusterRegistry, Restartable, SingleRegistry } from "./fleet.js"
import type { Rng } from "../prng.js"

const WORKER_FAULTS = ["worker SIGKILL", "worker SIGSTOP past its lease", "heartbeats dropped", "worker port closed"] as const

/** The faults on one redis-server. */
export const SINGLE_FAULT_KINDS = [
  ...WORKER_FAULTS,
  "Redis FLUSHALL",
  "Redis killed, restarted empty",
  "Pinboard killed, restarted",
  "Pinboard cut from Redis"
] as const

/**
 * The faults on a Redis Cluster. A Pinboard's cluster connection cannot go through a link:
 * ioredis connects to the nodes the cluster announces, and Pinboard has no address mapping.
 */
export const CLUSTER_FAULT_KINDS = [
  ...WORKER_FAULTS,
  "cluster master FLUSHALL",
  "cluster master killed, replica takes over",
  "Pinboard killed, restarted"
] as const

export type FaultKind = (typeof SINGLE_FAULT_KINDS)[number] | (typeof CLUSTER_FAULT_KINDS)[number]

/** When a fault held its target: from its start to its heal (ms). */
export interface FaultWindow {
  readonly kind: FaultKind
  readonly target: string
  readonly from: number
  readonly to: number
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const replicationOf = async (port: number): Promise<string> => {
  const client = new Redis(port, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  client.on("error", () => undefined)
  try {
    await client.connect()
    return await client.info("replication")
  } catch {
    return ""
  } finally {
    client.disconnect()
  }
}

/**
 * Resolves once the node on `port` reports `pattern` in INFO replication. Asked over a
 * connection, not with redis-cli: a process every 25 ms weighs on a loaded machine.
 */
const waitReplication = async (port: number, pattern: RegExp, what: string): Promise<string> => {
  const deadline = Date.now() + 30_000
  for (;;) {
    const info = await replicationOf(port)
    if (pattern.test(info)) return info
    if (Date.now() > deadline) throw new Error(`:${port} ${what} within 30 s`)
    await sleep(25)
  }
}

const signal = (proc: Restartable, name: NodeJS.Signals) => {
  try {
    process.kill(proc.current.pid, name)
  } catch {
    // gone already
  }
}

export interface Injector {
  readonly kinds: ReadonlyArray<FaultKind>
  /** Starts one fault if a target is free; its kind, or undefined when none could start. */
  readonly inject: () => FaultKind | undefined
  /** Resolves once every fault started has healed. */
  readonly healed: () => Promise<void>
  /** The faults over so far. */
  readonly windows: ReadonlyArray<FaultWindow>
  /** Faults that failed to heal (a run with any fails). */
  readonly unhealed: ReadonlyArray<FaultKind>
  /** How long each killed master's replica took to be promoted (ms). */
  readonly failovers: ReadonlyArray<number>
}

export const makeInjector = (fleet: ChaosFleet, leaseMs: number, rng: Rng, log: (line: string) => void): Injector => {
  const busy = new Set<string>()
  const healing = new Set<Promise<void>>()
  const windows: Array<FaultWindow> = []
  const unhealed: Array<FaultKind> = []
  const failovers: Array<number> = []
  const registry = fleet.registry
  const kinds: ReadonlyArray<FaultKind> = registry.mode === "single" ? SINGLE_FAULT_KINDS : CLUSTER_FAULT_KINDS

  const run = (kind: FaultKind, target: string, fault: () => Promise<void>) => {
    busy.add(target)
    const from = Date.now()
    const healed = fault()
      .catch((error: unknown) => {
        unhealed.push(kind)
        log(`${kind} on ${target} failed to heal: ${error instanceof Error ? error.message : String(error)}`)
      })
      .finally(() => {
        windows.push({ kind, target, from, to: Date.now() })
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
          run(kind, worker.name, async () => {
            signal(worker, "SIGKILL")
            await worker.current.exited
            await sleep(downMs)
            await worker.start()
          })
        } else if (kind === "worker SIGSTOP past its lease") {
          run(kind, worker.name, async () => {
            signal(worker, "SIGSTOP")
            await sleep(pastLeaseMs)
            signal(worker, "SIGCONT")
          })
        } else if (kind === "heartbeats dropped") {
          run(kind, worker.name, async () => {
            worker.link.cut(pastLeaseMs)
            await sleep(pastLeaseMs)
          })
        } else {
          run(kind, worker.name, async () => {
            signal(worker, "SIGUSR1")
            await sleep(1600)
          })
        }
        return true
      }
      case "Redis FLUSHALL":
      case "Redis killed, restarted empty":
        return registry.mode === "single" && !busy.has("redis") && singleRedisFault(kind, registry)
      case "cluster master FLUSHALL":
      case "cluster master killed, replica takes over":
        return registry.mode === "cluster" && !busy.has("cluster") && clusterFault(kind, registry)
      case "Pinboard killed, restarted": {
        if (fleet.pinboards.some((p) => busy.has(p.name))) return false
        const pinboard = rng.pick(fleet.pinboards)
        run(kind, pinboard.name, async () => {
          signal(pinboard, "SIGKILL")
          await pinboard.current.exited
          await pinboard.start()
        })
        return true
      }
      case "Pinboard cut from Redis": {
        // One Pinboard under a fault at a time, so the other one serves throughout.
        if (fleet.pinboards.some((p) => busy.has(p.name))) return false
        const pinboard = rng.pick(fleet.pinboards)
        const link = pinboard.redisLink
        if (link === undefined) return false
        // Past a lease and a half: the leases of the workers heartbeating through this
        // Pinboard lapse, the other Pinboard places their ids anew, and this one comes back to
        // a registry that moved on without it. At most two and a half, well within the
        // clients' 8 s timeout. Half the cuts reset the connection (ioredis sees it closed and
        // reconnects), half stall it (a partition: every call waits out its 1 s limit, and the
        // held calls reach Redis late, at the heal).
        const cutMs = rng.range(1.5 * leaseMs, 2.5 * leaseMs)
        const stall = rng.chance(0.5)
        run(kind, pinboard.name, async () => {
          if (stall) link.stall(cutMs)
          else link.cut(cutMs)
          await sleep(cutMs)
        })
        return true
      }
    }
  }

  const singleRedisFault = (kind: FaultKind, registry: SingleRegistry): boolean => {
    if (kind === "Redis FLUSHALL") {
      run(kind, "redis", async () => {
        const client = new Redis(registry.port, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 1 })
        try {
          await client.connect()
          await client.flushall()
        } finally {
          client.disconnect()
        }
      })
    } else {
      const downMs = rng.range(200, 800)
      run(kind, "redis", async () => {
        await registry.server.stop()
        await sleep(downMs)
        registry.server = await startRedisServer(registry.port)
      })
    }
    return true
  }

  // One cluster fault at a time: a master is killed only once its replica has caught up,
  // and the killed node is back as a synced replica before the next one.
  const clusterFault = (kind: FaultKind, { cluster }: ClusterRegistry): boolean => {
    // Drawn now, so the schedule does not depend on how long the cluster takes to answer.
    const which = rng.float()
    const downMs = rng.range(200, 800)
    run(kind, "cluster", async () => {
      const masters = await cluster.masters()
      const master = masters[Math.floor(which * masters.length)]!
      if (kind === "cluster master FLUSHALL") {
        // The replica follows: the shard's buckets are wiped.
        await cluster.cli(master, "FLUSHALL")
        return
      }
      const replica = await cluster.syncedReplicaOf(master)
      const killedAt = Date.now()
      await cluster.kill(master)
      try {
        // No CLUSTER FAILOVER: the replica is promoted by the cluster itself once the master
        // has been silent for cluster-node-timeout.
        await waitReplication(replica, /^role:master/m, "was not promoted")
        failovers.push(Date.now() - killedAt)
      } finally {
        await sleep(downMs)
        // Restarted on its nodes.conf, empty: it learns that its slots moved and follows the new master.
        await cluster.restart(master)
      }
      const info = await waitReplication(master, /^master_link_status:up/m, "did not sync with a master")
      const following = Number(/^master_port:(\d+)/m.exec(info)?.[1])
      if (following !== replica) log(`restarted :${master} follows :${following}, not :${replica}`)
    })
    return true
  }

  return {
    kinds,
    inject: () => {
      const kind = rng.pick(kinds)
      return attempt(kind) ? kind : undefined
    },
    windows,
    unhealed,
    failovers,
    healed: async () => {
      while (healing.size > 0) await Promise.all([...healing])
    }
  }
}
