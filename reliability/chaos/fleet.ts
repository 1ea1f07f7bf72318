// The chaos run's processes: the registry (one redis-server, with `--cluster` a Redis Cluster
// of three masters with a replica each, with `--sentinel` a master and a replica under three
// Sentinels), which the faults hit; the counters' storage
// redis-server, which they leave alone; two Pinboards and four counter workers, each
// restartable on its own port; and the links the workers' registry calls go through and, on
// one redis-server, each Pinboard's registry connection. With libfaketime, each Pinboard runs
// under it, its wall clock movable while it runs (reliability/chaos/clock.ts).
import { existsSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePort } from "../../test/support/Ports.js"
import { startRedisServer, type RedisServer } from "../../test/support/RedisServer.js"
import { startRedisCluster, type RedisCluster } from "../../test/support/RedisCluster.js"
import { SENTINEL_MASTER, SENTINEL_PASSWORD, startSentinelSet, type SentinelSet } from "../../test/support/SecureRedis.js"
import { spawnNode, type Proc } from "../../bench/processes.js"
import { clientLeftOf, type ClientLeft } from "./clientsLeft.js"
import { fakedClockEnv, replicaClock, type ReplicaClock } from "./clock.js"
import type { WorkerSpec } from "./counterWorker.js"
import { openLink, type Link } from "./link.js"

export const TOKEN = "chaos-token"
const MAIN = new URL("../../../dist/main.js", import.meta.url).pathname
const WORKER_SCRIPT = new URL("./counterWorker.js", import.meta.url).pathname

export interface FleetOptions {
  readonly leaseMs: number
  readonly workers: number
  readonly idleMs: number
  readonly portClosedMs: number
  /** A Redis Cluster, or a master and a replica under three Sentinels, for the registry instead of one redis-server. */
  readonly registry: "single" | "cluster" | "sentinel"
  /** The cluster's cluster-node-timeout: how long a dead master goes before its replica takes over. */
  readonly nodeTimeoutMs: number
  /** libfaketimeMT, to start the Pinboards under (their restarts too); undefined: real clocks. */
  readonly libfaketime: string | undefined
}

/** One redis-server, restarted on the same port. */
export interface SingleRegistry {
  readonly mode: "single"
  readonly port: number
  server: RedisServer
}

export interface ClusterRegistry {
  readonly mode: "cluster"
  readonly cluster: RedisCluster
}

export interface SentinelRegistry {
  readonly mode: "sentinel"
  readonly set: SentinelSet
}

/** The registry's ACL user on the Sentinel set's nodes. */
const SENTINEL_USER = { name: "pinboard", password: "chaos-redis-secret" } as const

type Registry = SingleRegistry | ClusterRegistry | SentinelRegistry

export interface Restartable {
  readonly name: string
  current: Proc
  readonly start: () => Promise<void>
}

export interface ChaosFleet {
  readonly dir: string
  readonly storage: RedisServer
  readonly registry: Registry
  /** On one redis-server, each Pinboard's registry connection goes through `redisLink`. */
  readonly pinboards: ReadonlyArray<Restartable & { readonly port: number; readonly redisLink: Link | undefined; readonly clock: ReplicaClock | undefined }>
  readonly workers: ReadonlyArray<Restartable & { readonly link: Link; readonly logFile: string }>
  /** The Pinboards' 499 access lines so far (the access log is on). */
  readonly clientsLeft: ReadonlyArray<ClientLeft>
  readonly stop: () => Promise<void>
  /** For exit paths that cannot wait: the redis-servers are not node processes of bench/processes.ts. */
  readonly stopSync: () => void
}

/**
 * How long a start may take before the run gives up on it. Generous: on a loaded 2-core
 * machine a Pinboard took 4 to 8 s to listen, and 40 to 60 s at a load average of 29 (no
 * fault running); a slow start is no fault of the fleet's.
 */
const START_LIMIT_MS = 120_000

const waitHealthy = async (port: number, proc: Proc): Promise<void> => {
  const deadline = Date.now() + START_LIMIT_MS
  for (;;) {
    if (!proc.alive()) throw new Error(`${proc.name} exited during start-up:\n${proc.lines.join("\n")}`)
    const ok = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(500) }).then(
      (r) => r.ok,
      () => false
    )
    if (ok) return
    if (Date.now() > deadline) throw new Error(`${proc.name} not healthy:\n${proc.lines.join("\n")}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

export const startFleet = async (options: FleetOptions): Promise<ChaosFleet> => {
  if (!existsSync(MAIN)) throw new Error("dist/main.js is missing: npm run chaos builds it")
  const dir = mkdtempSync(join(tmpdir(), "pinboard-chaos-"))
  const storage = await startRedisServer()
  const registry: Registry =
    options.registry === "cluster"
      ? { mode: "cluster", cluster: await startRedisCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: options.nodeTimeoutMs }) }
      : options.registry === "sentinel"
        ? { mode: "sentinel", set: await startSentinelSet([`${SENTINEL_USER.name} on >${SENTINEL_USER.password} ~* +@all`]) }
        : await (async () => {
            const port = await freePort()
            return { mode: "single", port, server: await startRedisServer(port) } as const
          })()
  const stopSync = () => {
    storage.stopSync()
    if (registry.mode === "single") registry.server.stopSync()
    else if (registry.mode === "cluster") registry.cluster.stopSync()
    else void registry.set.stop()
  }
  try {
    return await startProcesses(options, dir, storage, registry, stopSync)
  } catch (error) {
    stopSync()
    throw error
  }
}

/** How a Pinboard reaches the registry: through its link on one redis-server. */
const registryEnv = (registry: Registry, redisLink: Link | undefined): Record<string, string> => {
  switch (registry.mode) {
    case "single":
      return { PINBOARD_REDIS_URL: `redis://127.0.0.1:${redisLink!.port}` }
    case "cluster":
      return { PINBOARD_REDIS_CLUSTER: registry.cluster.seeds }
    case "sentinel":
      return {
        PINBOARD_REDIS_SENTINELS: registry.set.sentinels,
        PINBOARD_REDIS_SENTINEL_MASTER: SENTINEL_MASTER,
        PINBOARD_REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
        PINBOARD_REDIS_USERNAME: SENTINEL_USER.name,
        PINBOARD_REDIS_PASSWORD: SENTINEL_USER.password
      }
  }
}

const startProcesses = async (
  options: FleetOptions,
  dir: string,
  storage: RedisServer,
  registry: Registry,
  stopSync: () => void
): Promise<ChaosFleet> => {
  const clientsLeft: Array<ClientLeft> = []
  const pinboards = await Promise.all(
    ["pinboard-a", "pinboard-b"].map(async (name) => {
      const port = await freePort()
      const redisLink = registry.mode === "single" ? await openLink(() => registry.port) : undefined
      const clock = options.libfaketime === undefined ? undefined : replicaClock(join(dir, `${name}.clock`))
      const env = {
        ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("PINBOARD_"))),
        ...registryEnv(registry, redisLink),
        PINBOARD_TOKEN: TOKEN,
        PINBOARD_PORT: String(port),
        PINBOARD_HOST: "127.0.0.1",
        PINBOARD_LEASE_MS: String(options.leaseMs),
        PINBOARD_ACCESS_LOG: "true",
        ...(clock === undefined ? {} : fakedClockEnv(options.libfaketime!, clock.file))
      }
      const entry: Restartable & { port: number; redisLink: Link | undefined; clock: ReplicaClock | undefined } = {
        name,
        port,
        redisLink,
        clock,
        current: undefined as unknown as Proc,
        start: async () => {
          entry.current = spawnNode(name, undefined, MAIN, [], env)
          entry.current.onLine((line) => {
            clock?.observe(line)
            const left = clientLeftOf(name, line)
            if (left === undefined) return
            // A line's time is the replica's clock: while that may be off, when the line came
            // in, less the request's duration, tells better when the request arrived.
            clientsLeft.push(clock?.mayBeOff() ? { ...left, receivedAt: Date.now() - left.durationMs } : left)
          })
          await waitHealthy(port, entry.current)
        }
      }
      await entry.start()
      return entry
    })
  )

  const workers = await Promise.all(
    Array.from({ length: options.workers }, async (_, i) => {
      const name = `w${i + 1}`
      // Registry calls of even workers go to Pinboard A, of odd ones to B.
      const target = pinboards[i % 2]!
      const link = await openLink(() => target.port)
      const port = await freePort()
      const logFile = join(dir, `${name}.log`)
      const spec: WorkerSpec = {
        worker: name,
        registry: `http://127.0.0.1:${link.port}`,
        token: TOKEN,
        storageUrl: storage.url,
        logFile,
        port,
        idleMs: options.idleMs,
        portClosedMs: options.portClosedMs
      }
      const entry: Restartable & { link: Link; logFile: string } = {
        name,
        link,
        logFile,
        current: undefined as unknown as Proc,
        start: async () => {
          entry.current = spawnNode(name, undefined, WORKER_SCRIPT, [JSON.stringify(spec)])
          await entry.current.waitForLine(/^worker \S+ listening/, START_LIMIT_MS)
        }
      }
      await entry.start()
      return entry
    })
  )

  return {
    dir,
    storage,
    registry,
    pinboards,
    workers,
    clientsLeft,
    stop: async () => {
      for (const link of [...workers.map((w) => w.link), ...pinboards.map((p) => p.redisLink)]) link?.close()
      await Promise.all([
        storage.stop(),
        registry.mode === "single" ? registry.server.stop() : registry.mode === "cluster" ? registry.cluster.stop() : registry.set.stop()
      ])
    },
    stopSync
  }
}
