// A fleet for end-to-end tests of the data plane: the built Pinboard (`node dist/main.js`),
// optionally on its own redis-server or local Redis Cluster, fixture workers
// (test/fixtures/worker.mjs) and "virtual" workers the test registers itself over the registry
// API, and the registry calls tests need (Wire.ts has the HTTP helpers). Everything started is
// stopped by pid in `Fleet.stop`.
import { hash, randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, it } from "vitest"
import { freePort, spawnProcess, type Spawned } from "./Processes.js"
import { startRedisCluster, type ClusterOptions, type RedisCluster } from "./RedisCluster.js"
import { startRedisServer, type RedisServer } from "./RedisServer.js"
import { poll, scaled } from "./Time.js"
import { request } from "./Wire.js"

export { eventually } from "./Time.js"

const MAIN = new URL("../../dist/main.js", import.meta.url).pathname
const WORKER = new URL("../fixtures/worker.mjs", import.meta.url).pathname

export const TOKEN = "e2e-deployment-token"
/** Short enough for a quick cold start; long enough that a busy machine keeps its leases (so it scales). */
export const LEASE_MS = scaled(2000)
export const BUCKETS = 16

/**
 * How long a Pinboard or worker process may take to be ready once spawned. Nominal start-up is
 * under a second; CI runs three test files at once on two cores, and a process started among
 * a dozen others has been seen silent for 15 s.
 */
export const PROCESS_START_MS = 30_000

let counter = 0
/** A fresh id (or key) per use, so tests sharing a fleet never share a placement. */
export const uid = (label = "id"): string => `${label}-${++counter}-${randomBytes(3).toString("hex")}`

export interface Pinboard {
  readonly url: string
  readonly port: number
  readonly pid: number
  readonly process: Spawned
  readonly leaseMs: number
  /** Where workers and inspect reach the registry API: `url`, or the registry's own listener (`registryPort`). */
  readonly registryUrl: string
  /** Kills it by pid (also done by `Fleet.stop`). */
  readonly stop: () => Promise<void>
}

export interface Worker {
  readonly id: string
  readonly port: number
  readonly advertiseUrl: string
  readonly pid: number
  readonly process: Spawned
}

export interface VirtualWorker {
  readonly id: string
  readonly incarnation: string
  /** Sends a heartbeat now with this flag, and keeps sending it. */
  readonly setDraining: (draining: boolean) => Promise<void>
  readonly deregister: () => Promise<void>
}

/** Where a Pinboard keeps its registry: one redis-server, a Redis Cluster, or (neither) embedded. */
export interface RegistryBacking {
  readonly redis?: RedisServer
  /** PINBOARD_REDIS_CLUSTER, the cluster's seed nodes; not with `redis`. */
  readonly cluster?: RedisCluster
}

export type RegistryKind = "redis" | "cluster" | "embedded"

export interface PinboardOptions extends RegistryBacking {
  /** PINBOARD_REDIS_PREFIX with `redis` or `cluster`; a fresh one when omitted. */
  readonly prefix?: string
  readonly leaseMs?: number
  /** Written to a JSON file and passed as PINBOARD_CONFIG. */
  readonly config?: Record<string, unknown>
  /** More environment (PINBOARD_* variables), laid over the rest. */
  readonly env?: Readonly<Record<string, string>>
  /** The registry API on its own listener (PINBOARD_REGISTRY_PORT, a free port); the start is awaited there. */
  readonly registryPort?: boolean
}

export interface WorkerOptions {
  readonly id: string
  readonly namespaces: ReadonlyArray<string>
  /** Hostname-aware mode: registered instead of `namespaces`, at `epoch`. */
  readonly registrations?: ReadonlyArray<{ readonly namespace: string; readonly hostname: string; readonly env: string }>
  readonly epoch?: string
  /** advertiseUrl path prefix, e.g. "/base". */
  readonly prefix?: string
  readonly headroom?: number
}

export class Fleet {
  readonly dir = mkdtempSync(join(tmpdir(), "pinboard-fleet-"))
  /** Shared by every fixture worker of this fleet, for `key=` logs and `mode=once` claims. */
  readonly stateDir = mkdtempSync(join(this.dir, "state-"))
  private readonly stops: Array<() => Promise<unknown> | void> = []

  async redis(): Promise<RedisServer> {
    const server = await startRedisServer()
    this.stops.push(() => server.stop())
    return server
  }

  /** A local Redis Cluster, stopped with the fleet. */
  async cluster(options: ClusterOptions = {}): Promise<RedisCluster> {
    const cluster = await startRedisCluster(options)
    this.stops.push(() => cluster.stop())
    return cluster
  }

  async pinboard(options: PinboardOptions = {}): Promise<Pinboard> {
    if (options.redis !== undefined && options.cluster !== undefined) throw new Error("a Pinboard takes redis or cluster, not both")
    if (!existsSync(MAIN)) throw new Error("dist/main.js is missing: run `npm run build` before the end-to-end tests")
    const port = await freePort()
    const leaseMs = options.leaseMs ?? LEASE_MS
    const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("PINBOARD_")))
    const env: Record<string, string> = {
      ...clean,
      PINBOARD_TOKEN: TOKEN,
      PINBOARD_PORT: String(port),
      PINBOARD_HOST: "127.0.0.1",
      PINBOARD_LEASE_MS: String(leaseMs),
      PINBOARD_BUCKETS: String(BUCKETS)
    }
    if (options.redis !== undefined) {
      env.PINBOARD_REDIS_URL = options.redis.url
      env.PINBOARD_REDIS_PREFIX = options.prefix ?? uid("pb")
    }
    if (options.cluster !== undefined) {
      env.PINBOARD_REDIS_CLUSTER = options.cluster.seeds
      env.PINBOARD_REDIS_PREFIX = options.prefix ?? uid("pb")
    }
    if (options.config !== undefined) {
      const file = join(this.dir, `${uid("config")}.json`)
      writeFileSync(file, JSON.stringify(options.config))
      env.PINBOARD_CONFIG = file
    }
    if (options.registryPort === true) env.PINBOARD_REGISTRY_PORT = String(await freePort())
    const child = spawnProcess(process.execPath, [MAIN], { env: { ...env, ...options.env } })
    this.stops.push(() => child.kill())
    const url = `http://127.0.0.1:${port}`
    const registryUrl = env.PINBOARD_REGISTRY_PORT === undefined ? url : `http://127.0.0.1:${env.PINBOARD_REGISTRY_PORT}`
    await poll(
      async () => {
        if (child.exit !== undefined) throw new Error(`pinboard exited during start-up (${JSON.stringify(child.exit)}):\n${child.lines.join("\n")}`)
        return fetch(`${registryUrl}/healthz`, { signal: AbortSignal.timeout(scaled(1000)) }).then(
          async (res) => (await res.arrayBuffer(), res.status === 200),
          () => false
        )
      },
      { timeoutMs: PROCESS_START_MS, reason: `pinboard's /healthz on ${url}` }
    ).catch((error: Error) => {
      throw new Error(`${error.message}; its output:\n${child.lines.join("\n")}`)
    })
    return { url, port, pid: child.pid, process: child, leaseMs, registryUrl, stop: async () => void (await child.kill()) }
  }

  async worker(pinboard: Pinboard, options: WorkerOptions): Promise<Worker> {
    const args = [
      WORKER,
      "--pinboard", pinboard.registryUrl,
      "--token", TOKEN,
      "--worker", options.id,
      "--namespaces", options.namespaces.join(","),
      "--state-dir", this.stateDir,
      "--headroom", String(options.headroom ?? 10)
    ]
    if (options.prefix !== undefined) args.push("--prefix", options.prefix)
    if (options.registrations !== undefined) args.push("--registrations", JSON.stringify(options.registrations))
    if (options.epoch !== undefined) args.push("--epoch", options.epoch)
    const child = spawnProcess(process.execPath, args)
    this.stops.push(() => child.kill())
    const ready = await child.waitForLine(new RegExp(`^worker ${options.id} ready on (\\d+)$`), PROCESS_START_MS)
    const port = Number(ready[1])
    return { id: options.id, port, advertiseUrl: `http://127.0.0.1:${port}${options.prefix ?? ""}`, pid: child.pid, process: child }
  }

  /** A worker the test registers (and heartbeats) itself, e.g. with an advertiseUrl nobody listens on. */
  async virtualWorker(
    pinboard: Pinboard,
    options: { readonly id: string; readonly advertiseUrl: string; readonly namespaces: ReadonlyArray<string>; readonly draining?: boolean }
  ): Promise<VirtualWorker> {
    let draining = options.draining ?? false
    const registered = await registryCall(pinboard, "POST", "/registry/workers", {
      worker: options.id,
      advertiseUrl: options.advertiseUrl,
      namespaces: options.namespaces,
      headroom: 10,
      draining
    })
    if (registered.status !== 200) throw new Error(`register answered ${registered.status} ${registered.text}`)
    const { incarnation, heartbeatMs } = registered.json as { incarnation: string; heartbeatMs: number }
    const beat = async () => {
      await registryCall(pinboard, "POST", `/registry/workers/${options.id}/heartbeat`, { incarnation, headroom: 10, draining }).catch(
        () => undefined
      )
    }
    const timer = setInterval(() => void beat(), heartbeatMs)
    timer.unref()
    this.stops.push(() => clearInterval(timer))
    return {
      id: options.id,
      incarnation,
      setDraining: async (value) => {
        draining = value
        await beat()
      },
      deregister: async () => {
        clearInterval(timer)
        await registryCall(pinboard, "DELETE", `/registry/workers/${options.id}?incarnation=${incarnation}`)
      }
    }
  }

  /** Lines every fixture worker logged for `key=K`: "<worker> refused|served <method> <url>". */
  keyLog(key: string): Array<string> {
    const file = join(this.stateDir, `${key}.log`)
    return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter((line) => line !== "") : []
  }

  async stop(): Promise<void> {
    for (const stop of this.stops.reverse()) await stop()
    this.stops.length = 0
    rmSync(this.dir, { recursive: true, force: true })
  }
}

/** The standard fleet: Pinboard (Redis, Redis Cluster or embedded), worker A on /threads and /pair, worker B on /pair. */
export interface StandardFleet {
  readonly fleet: Fleet
  /** The Redis run's redis-server (another Pinboard may use it under another prefix). */
  readonly redis: RedisServer | undefined
  /** The cluster run's Redis Cluster (likewise). */
  readonly cluster: RedisCluster | undefined
  /** The registry of this fleet's Pinboard, for another Pinboard on it (under its own prefix). */
  readonly backing: RegistryBacking
  readonly pinboard: Pinboard
  readonly a: Worker
  readonly b: Worker
}

/** Header timeout 1 s (504 tests); nacks counted but never degrading a worker during the suite. */
export const STANDARD_CONFIG = {
  forwards: { timeoutMs: 1000 },
  nack: { threshold: 1_000_000, windowMs: 600_000 }
}

/** Starts into `fleet`, which the caller stops (in afterAll, even when this never finished). */
export const startStandardFleet = async (registry: RegistryKind, fleet: Fleet): Promise<StandardFleet> => {
  try {
    const redis = registry === "redis" ? await fleet.redis() : undefined
    // Three shards are what make it a cluster; replicas only matter to the failover tests.
    const cluster = registry === "cluster" ? await fleet.cluster({ masters: 3, replicasPerMaster: 0 }) : undefined
    const backing: RegistryBacking = { ...(redis === undefined ? {} : { redis }), ...(cluster === undefined ? {} : { cluster }) }
    const pinboard = await fleet.pinboard({ ...backing, config: STANDARD_CONFIG })
    const [a, b] = await Promise.all([
      fleet.worker(pinboard, { id: uid("wa"), namespaces: ["/threads", "/pair"] }),
      fleet.worker(pinboard, { id: uid("wb"), namespaces: ["/pair"] })
    ])
    await waitForColdStart(pinboard, "/threads")
    return { fleet, redis, cluster, backing, pinboard, a, b }
  } catch (error) {
    await fleet.stop()
    throw error
  }
}

/**
 * A standard fleet for the enclosing `describe`, started before its tests and stopped after.
 * `get` is only valid inside tests; `fullIt` registers a test only in the full runs (Redis and
 * Redis Cluster), so the embedded run keeps the smaller set.
 */
export const useStandardFleet = (registry: RegistryKind) => {
  let fleet: Fleet | undefined
  let standard: StandardFleet | undefined
  beforeAll(async () => {
    fleet = new Fleet()
    standard = await startStandardFleet(registry, fleet)
  }, scaled(60_000))
  afterAll(async () => {
    await fleet?.stop()
  })
  const fullIt: typeof it = ((name: string, fn: () => Promise<void>, timeout?: number) => {
    if (registry !== "embedded") it(name, fn, timeout)
  }) as typeof it
  return { get: (): StandardFleet => standard!, fullIt }
}

// ---- the registry -----------------------------------------------------------------------------

export const bucketOf = (namespace: string, id: string, buckets = BUCKETS): number =>
  hash("sha1", `\n${namespace}\n${id}`, "buffer").readUInt32BE(0) % buckets

const COLD_START = JSON.stringify({ error: "registry cold start, retry" })

/** The ids `waitForColdStart` requests (and so places): one per bucket of `namespace`, by bucket. */
export const coldStartIds = (namespace: string): Map<number, string> => {
  const ids = new Map<number, string>()
  for (let i = 0; ids.size < BUCKETS; i++) {
    const id = `warm-${i}`
    const bucket = bucketOf(namespace, id)
    if (!ids.has(bucket)) ids.set(bucket, id)
  }
  return ids
}

/**
 * Polls one id per bucket (docs/protocol.md's bucket hash) of `namespace` until none answers `503
 * registry cold start`. Each poll that gets through places its id: harmless, ids are fresh. In
 * hostname-aware mode `host` names a hostname the namespace is bound for, in env "".
 */
export const waitForColdStart = async (
  pinboard: Pinboard,
  namespace: string,
  host?: string,
  send: (path: string) => Promise<{ readonly status: number; readonly text: string }> = (path) =>
    request(pinboard, path, host === undefined ? {} : { headers: { host } })
): Promise<void> => {
  const pending = coldStartIds(namespace)
  await poll(
    async () => {
      for (const [bucket, id] of pending) {
        const res = await send(`${namespace}/${id}/echo`)
        // Hostname-aware without `host`: no answer could ever be the cold start.
        if (res.status === 400) throw new Error(`waiting for the cold start: ${res.status} ${res.text}`)
        if (!(res.status === 503 && res.text === COLD_START)) pending.delete(bucket)
      }
      return pending.size === 0
    },
    { timeoutMs: pinboard.leaseMs + 15_000, everyMs: 100, reason: `the end of ${namespace}'s cold start` }
  )
}

export interface JsonAnswer {
  readonly status: number
  readonly text: string
  readonly json: unknown
}

export const registryCall = async (pinboard: Pinboard, method: string, path: string, body?: unknown): Promise<JsonAnswer> => {
  const res = await fetch(`${pinboard.registryUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(scaled(5000))
  })
  const text = await res.text()
  return { status: res.status, text, json: text === "" ? undefined : JSON.parse(text) }
}

export interface PlacementRow {
  readonly worker: string
  readonly epoch: string
  readonly live: boolean
}

/** GET /registry/placements/{namespace without /}/{id}: the row, or undefined on 404. */
export const placementOf = async (pinboard: Pinboard, namespace: string, id: string): Promise<PlacementRow | undefined> => {
  const answer = await registryCall(pinboard, "GET", `/registry/placements/${namespace.slice(1)}/${id}`)
  if (answer.status === 404) return undefined
  if (answer.status !== 200) throw new Error(`placements answered ${answer.status} ${answer.text}`)
  return answer.json as PlacementRow
}

export const nacksOf = async (pinboard: Pinboard, worker: string): Promise<number> => {
  const answer = await registryCall(pinboard, "GET", "/registry/workers")
  const found = (answer.json as { workers: Array<{ worker: string; nacks: number }> }).workers.find((w) => w.worker === worker)
  if (found === undefined) throw new Error(`worker ${worker} is not listed`)
  return found.nacks
}
