// Where bench:scale runs and what it reads: a redis-server or a local Redis Cluster started
// for the run, the registry service built over a client of it (the one place that knows the
// registry's constructor), and Redis-wide facts summed over the masters (INFO commandstats,
// INFO cpu, INFO memory, DBSIZE, SLOWLOG). Nothing here knows a key or a script name.
import { Clock, Effect } from "effect"
import { Cluster, Redis } from "ioredis"
import { makeRedisBackend } from "../../src/registry/Redis.js"
import { clientOptions, clusterOptions, defineScripts, type RedisClient } from "../../src/registry/RedisConnection.js"
import { clusterNodes } from "../../src/registry/RedisTarget.js"
import type { RegistryPolicy } from "../../src/registry/Domain.js"
import { policyOf } from "../../src/registry/Policy.js"
import type { RegisterAnswer, RegistryService } from "../../src/registry/Registry.js"
import { makeRegistry } from "../../src/registry/RegistryOnBackend.js"
import { startRedisCluster } from "../../test/support/RedisCluster.js"
import { startRedisServer } from "../../test/support/RedisServer.js"
import { configForTests } from "../../test/support/TestConfig.js"
import { shiftedClock } from "../shiftedClock.js"

export const BUCKETS = 16
export const NAMESPACE = "/threads"
/** The bench's own calls wait this long: a measurement never fails for a slow Redis. */
const BENCH_COMMAND_TIMEOUT_MS = 60_000

/**
 * The registry service over `client`, as Pinboard builds it. The one place that knows the
 * registry's constructor: adapt it here when that changes (an Effect needing a Scope would
 * be run here, its scope closed in `ScaleTarget.stop` or by the caller).
 */
export const makeScaleRegistry = (client: RedisClient, prefix: string, policy: RegistryPolicy): RegistryService =>
  makeRegistry(makeRedisBackend(client, { prefix, buckets: BUCKETS, policy }), policy, () => "wind_down")

export const policyFor = (leaseMs: number): RegistryPolicy => policyOf(configForTests({ leaseMs }))

export interface ScaleTarget {
  readonly label: string
  /** Long command timeout: for setting up and for the bench's own reads. */
  readonly client: RedisClient
  /** A new client with Pinboard's own options (1 s command timeout, fast failure), as one Pinboard has. */
  readonly pinboardClient: () => Promise<RedisClient>
  /** One connection per master, to read and reset its statistics. */
  readonly masters: () => ReadonlyArray<Redis>
  readonly stop: () => Promise<void>
  readonly stopSync: () => void
}

const quiet = <C extends RedisClient>(client: C): C => {
  client.on("error", () => {
    // surfaces as failed calls
  })
  defineScripts(client)
  return client
}

export const startServerTarget = async (): Promise<ScaleTarget> => {
  const server = await startRedisServer()
  const make = (options: object) => quiet(new Redis({ ...clientOptions, ...options, host: "127.0.0.1", port: server.port, lazyConnect: true }))
  const client = make({ commandTimeout: BENCH_COMMAND_TIMEOUT_MS })
  const opened: Array<RedisClient> = [client]
  await client.connect()
  return {
    label: `redis-server pid ${server.pid} on 127.0.0.1:${server.port}`,
    client,
    pinboardClient: async () => {
      const other = make({})
      opened.push(other)
      await other.connect()
      return other
    },
    masters: () => [client],
    stop: async () => {
      for (const c of opened) c.disconnect()
      await server.stop()
    },
    stopSync: server.stopSync
  }
}

export const startClusterTarget = async (masters: number): Promise<ScaleTarget> => {
  const cluster = await startRedisCluster({ masters, replicasPerMaster: 0 })
  const seeds = clusterNodes(cluster.seeds.split(","))
  const make = (redisOptions: object) => quiet(new Cluster(seeds, { ...clusterOptions, redisOptions: { ...clientOptions, ...redisOptions } }))
  const client = make({ commandTimeout: BENCH_COMMAND_TIMEOUT_MS })
  const opened: Array<RedisClient> = [client]
  await client.connect()
  return {
    label: `Redis Cluster of ${masters} masters (no replicas) on 127.0.0.1 ports ${cluster.nodes.map((n) => n.port).join(", ")}, pids ${cluster.nodes.map((n) => n.pid()).join(", ")}`,
    client,
    pinboardClient: async () => {
      const other = make({})
      opened.push(other)
      await other.connect()
      return other
    },
    masters: () => (client as Cluster).nodes("master"),
    stop: async () => {
      for (const c of opened) c.disconnect()
      await cluster.stop()
    },
    stopSync: cluster.stopSync
  }
}

const onMasters = <A>(target: ScaleTarget, run: (node: Redis) => Promise<A>): Promise<Array<A>> => Promise.all(target.masters().map(run))
const sum = (values: ReadonlyArray<number>): number => values.reduce((a, b) => a + b, 0)
const infoField = (info: string, name: string): number => Number(new RegExp(`^${name}:([0-9.]+)`, "m").exec(info)?.[1] ?? 0)

/** Everything a new measurement should not see: every master emptied (its scripts stay loaded). */
export const flushAll = async (target: ScaleTarget): Promise<void> => {
  await onMasters(target, (node) => node.flushall())
}

export const resetStats = async (target: ScaleTarget): Promise<void> => {
  await onMasters(target, (node) => node.config("RESETSTAT"))
}

/** Script commands (EVAL, EVALSHA, FCALL and their _RO forms): the commands inside a script are counted within them. */
const SCRIPT_COMMAND = /^cmdstat_(?:eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro):calls=(\d+),usec=(\d+)/gm

/** Calls and usec of every script command since the last reset, summed over the masters. */
export const scriptStats = async (target: ScaleTarget): Promise<{ readonly calls: number; readonly usec: number }> => {
  const infos = await onMasters(target, (node) => node.info("commandstats"))
  let calls = 0
  let usec = 0
  for (const info of infos) {
    for (const match of info.matchAll(SCRIPT_COMMAND)) {
      calls += Number(match[1])
      usec += Number(match[2])
    }
  }
  return { calls, usec }
}

/** The Redis processes' CPU (user + system, µs) so far, summed over the masters: all their work, I/O included. */
export const serverCpuUs = async (target: ScaleTarget): Promise<number> =>
  sum(await onMasters(target, async (node) => {
    const info = await node.info("cpu")
    return (infoField(info, "used_cpu_user") + infoField(info, "used_cpu_sys")) * 1e6
  }))

export const usedMemory = async (target: ScaleTarget): Promise<number> =>
  sum(await onMasters(target, async (node) => infoField(await node.info("memory"), "used_memory")))

export const dbSize = async (target: ScaleTarget): Promise<number> => sum(await onMasters(target, (node) => node.dbsize()))

/** Logs every command slower than `slowerThanUs` from now on (the log emptied). */
export const startSlowlog = async (target: ScaleTarget, slowerThanUs: number): Promise<void> => {
  await onMasters(target, async (node) => {
    await node.config("SET", "slowlog-log-slower-than", String(slowerThanUs))
    await node.config("SET", "slowlog-max-len", "10000")
    await node.call("SLOWLOG", "RESET")
  })
}

export interface SlowCommand {
  readonly durationUs: number
  readonly command: string
  readonly at: number
}

/** The slow log of every master, longest first. */
export const readSlowlog = async (target: ScaleTarget): Promise<ReadonlyArray<SlowCommand>> => {
  const logs = await onMasters(target, (node) => node.call("SLOWLOG", "GET", "10000") as Promise<Array<Array<unknown>>>)
  return logs
    .flat()
    .map((entry) => ({
      durationUs: Number(entry[2]),
      command: String((entry[3] as Array<unknown> | undefined)?.[0] ?? "?").toLowerCase(),
      at: Number(entry[1]) * 1000
    }))
    .sort((a, b) => b.durationUs - a.durationUs)
}

export interface Measured {
  /** Redis µs in script commands, summed over the masters (INFO commandstats). */
  readonly redisUs: number
  readonly calls: number
  /** This process's CPU µs. */
  readonly cpuUs: number
  /** The Redis processes' CPU µs (INFO cpu), all work included. */
  readonly serverCpuUs: number
  readonly wallMs: number
}

/** The cost of `work`: script time and calls from reset statistics, and CPU on both sides. */
export const measure = async (target: ScaleTarget, work: () => Promise<unknown>): Promise<Measured> => {
  await resetStats(target)
  const server = await serverCpuUs(target)
  const cpu = process.cpuUsage()
  const started = performance.now()
  await work()
  const wallMs = performance.now() - started
  const used = process.cpuUsage(cpu)
  const redis = await scriptStats(target)
  return { redisUs: redis.usec, calls: redis.calls, cpuUs: used.user + used.system, serverCpuUs: (await serverCpuUs(target)) - server, wallMs }
}

export interface FleetMember {
  readonly worker: string
  readonly headroom: number
}

/**
 * Registers `members` in NAMESPACE, past the cold start: first on a clock one lease and a second
 * back (every bucket's first use), then now. Answers the second registrations, in order.
 */
export const registerFleet = async (
  registry: RegistryService,
  members: ReadonlyArray<FleetMember>,
  concurrency = 16
): Promise<ReadonlyArray<RegisterAnswer>> => {
  const register = (member: FleetMember, w: number) =>
    registry.register({
      worker: member.worker,
      advertiseUrl: `http://10.0.${Math.floor(w / 250)}.${w % 250}:8080`,
      namespaces: [{ namespace: NAMESPACE, hostname: "", env: "" }],
      callerKey: undefined,
      headroom: member.headroom,
      draining: false
    })
  const all = Effect.forEach(members, register, { concurrency })
  await Effect.runPromise(Effect.provideService(Effect.asVoid(all), Clock.Clock, shiftedClock(-(registry.leaseMs + 1000))))
  return Effect.runPromise(all)
}

/** Resolves `ids` (new ones are placed), `concurrency` in flight; answers the worker of each (undefined: refused). */
/** Resolves `ids`; each one's affinity value is the id itself unless `affinityOf` says otherwise. */
export const placeIds = (
  registry: RegistryService,
  ids: ReadonlyArray<string>,
  caller: string | undefined,
  concurrency: number,
  affinityOf: (id: string, index: number) => string = (id) => id
): Promise<ReadonlyArray<string | undefined>> =>
  Effect.runPromise(
    Effect.forEach(
      ids,
      (id, i) =>
        registry.resolve({ env: "", namespace: NAMESPACE, id, hostname: "", caller, affinity: affinityOf(id, i), excluded: [] }).pipe(
          Effect.map((placement) => placement.worker),
          Effect.orElseSucceed(() => undefined)
        ),
      { concurrency }
    )
  )
