// Resolve throughput on Redis, against the floor of a trivial EVALSHA on the same client.
//
//   npm run bench:resolve                      resolve vs trivial EVALSHA at 1, 16, 64 callers
//   npm run bench:resolve -- --layers          also the layers in between (see KINDS below)
//   npm run bench:resolve -- --seconds=5       measuring window per level and kind
//   node dist-bench/bench/resolve.js --only=resolve --levels=64    one kind and level, e.g. under --cpu-prof
//
// Starts its own redis-server on a free loopback port (no persistence), registers 4 workers
// for `/threads`, places 10,000 ids, then measures resolves of already placed ids (random
// among them) for a fixed window per concurrency level after a short warm-up. Prints
// figures; it is not a test. Target: resolve/s >= 0.7 x trivial EVALSHA/s at every level.
import { availableParallelism } from "node:os"
import { Clock, Effect } from "effect"
import { Redis } from "ioredis"
import { bucketOf } from "../src/contract/Bucket.js"
import { minLeaseLeftMs, type ResolveOutcome } from "../src/registry/Domain.js"
import { makeRedisBackend } from "../src/registry/Redis.js"
import { clientOptions, defineScripts } from "../src/registry/RedisConnection.js"
import { policyOf } from "../src/registry/Policy.js"
import type { RegisterInput, ResolveRequest } from "../src/registry/Registry.js"
import { makeRegistry } from "../src/registry/RegistryOnBackend.js"
import { startRedisServer, type RedisServer } from "../test/support/RedisServer.js"
import { configForTests } from "../test/support/TestConfig.js"
import { shiftedClock } from "./shiftedClock.js"

const DEFAULT_LEVELS = [1, 16, 64]
const IDS = 10_000
const WORKERS = 4
const BUCKETS = 16
const PREFIX = "bench"
const NAMESPACE = "/threads"
/** Large, so no lease lapses during the run and no heartbeats are needed. */
const LEASE_MS = 600_000
const WARMUP_MS = 500
const TARGET = 0.7
/** Whatever happens, the process ends (and the server with it) after this. */
const HARD_LIMIT_MS = 120_000

const argv = process.argv.slice(2)
const layers = argv.includes("--layers")
const secondsArg = argv.find((a) => a.startsWith("--seconds="))
const windowMs = Math.round(1000 * (secondsArg !== undefined ? Number(secondsArg.slice(10)) : layers ? 2 : 3))
if (!(windowMs > 0)) throw new Error("--seconds= expects a positive number")
const listArg = (name: string): Array<string> | undefined =>
  argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3).split(",").filter((x) => x !== "")
const LEVELS = (listArg("levels") ?? DEFAULT_LEVELS.map(String)).map(Number)
if (LEVELS.some((n) => !(Number.isInteger(n) && n > 0))) throw new Error("--levels= expects positive integers")
const onlyKinds = listArg("only")

// ---------------------------------------------------------------------------------------
// Setup

interface Stats {
  calls: number
  errors: number
  fresh: number
  readonly latencies: Array<number>
}

const newStats = (): Stats => ({ calls: 0, errors: 0, fresh: 0, latencies: [] })

type Commands = Record<string, (...args: Array<string>) => Promise<unknown>>

const main = async (server: RedisServer): Promise<void> => {
  // The production client's options (auto-pipelining, commandTimeout, no offline queue).
  const client = new Redis({ ...clientOptions, host: "127.0.0.1", port: server.port, lazyConnect: true })
  client.on("error", () => {
    // surfaces as failed calls
  })
  try {
    defineScripts(client)
    client.defineCommand("bench_trivial", { numberOfKeys: 1, lua: "return 1" })
    await client.connect()
    await run(client, server)
  } finally {
    client.disconnect()
  }
}

const run = async (client: Redis, server: RedisServer): Promise<void> => {
  const commands = client as unknown as Commands
  const policy = policyOf(configForTests({ leaseMs: LEASE_MS }))
  const backend = makeRedisBackend(client, { prefix: PREFIX, buckets: BUCKETS, policy })
  const registry = makeRegistry(backend, policy, () => "wind_down")

  // Cold start lasts one lease from a bucket's first use. Touch every bucket (register
  // does) one lease and a second in the past, then register again at the real time so
  // the leases run from now: resolves at the wall clock are past cold start.
  const registrations: Array<RegisterInput> = Array.from({ length: WORKERS }, (_, w) => ({
    worker: `w${w}`,
    advertiseUrl: `http://127.0.0.1:${9000 + w}`,
    namespaces: [{ namespace: NAMESPACE, hostname: "", env: "" }],
    callerKey: undefined,
    headroom: 100,
    draining: false
  }))
  const registerAll = Effect.forEach(registrations, (r) => registry.register(r), { discard: true })
  await Effect.runPromise(Effect.provideService(registerAll, Clock.Clock, shiftedClock(-(LEASE_MS + 1000))))
  await Effect.runPromise(registerAll)

  const requests: Array<ResolveRequest> = Array.from({ length: IDS }, (_, i) => {
    const id = `t_${i.toString(16).padStart(5, "0")}`
    return { env: "", namespace: NAMESPACE, id, hostname: "", caller: undefined, affinity: id, excluded: [] }
  })
  const bucketOfId = requests.map((r) => bucketOf(r.env, r.namespace, r.id, BUCKETS))
  const tags = Array.from({ length: BUCKETS }, (_, b) => `{${PREFIX}:${b}}`)
  const trivialKeys = tags.map((tag) => `${tag}:trivial`)

  // Place every id once.
  const placeStarted = performance.now()
  const placed = await Effect.runPromise(
    Effect.forEach(requests, (r) => Effect.result(registry.resolve(r)), { concurrency: 64 })
  )
  const placeMs = performance.now() - placeStarted
  const owners = new Map<string, number>()
  let placeFailures = 0
  for (const result of placed) {
    if (result._tag === "Failure" || !result.success.isNew) placeFailures++
    else owners.set(result.success.worker, (owners.get(result.success.worker) ?? 0) + 1)
  }
  if (placeFailures > 0) {
    const first = placed.find((r) => r._tag === "Failure")
    throw new Error(`placing ${IDS} ids: ${placeFailures} did not place anew (first failure: ${JSON.stringify(first)})`)
  }
  const spread = [...owners.entries()].sort().map(([w, n]) => `${w}=${n}`).join(" ")
  console.log(
    `redis-server pid ${server.pid} on 127.0.0.1:${server.port}; ${WORKERS} workers, ${BUCKETS} buckets, lease ${LEASE_MS} ms`
  )
  console.log(`placed ${IDS} ids in ${(placeMs / 1000).toFixed(2)} s (${rate(IDS, placeMs)}/s); owners: ${spread}`)

  // ---------------------------------------------------------------------------------------
  // What is measured. Every kind resolves (or touches) a random placed id's bucket.

  const minLeaseLeft = String(minLeaseLeftMs(policy.leaseMs))
  const fixed = [String(policy.leaseMs), minLeaseLeft, String(policy.balanceFactor), String(policy.nackThreshold), String(policy.nackWindowMs)]
  const checkPlaced = (stats: Stats, outcome: { readonly isNew: boolean }) => {
    if (outcome.isNew) stats.fresh++
  }

  type Runner = (concurrency: number, deadline: number, stats: Stats) => Promise<void>

  /** Each caller an async loop awaiting one call at a time. */
  const promiseCallers =
    (call: (i: number, stats: Stats) => Promise<unknown>): Runner =>
    async (concurrency, deadline, stats) => {
      const loop = async () => {
        while (performance.now() < deadline) {
          const i = Math.floor(Math.random() * IDS)
          const started = performance.now()
          try {
            await call(i, stats)
            stats.latencies.push(performance.now() - started)
            stats.calls++
          } catch {
            stats.errors++
          }
        }
      }
      await Promise.all(Array.from({ length: concurrency }, loop))
    }

  /** Each caller one fiber looping over the effect. */
  const fiberCallers =
    (call: (i: number, stats: Stats) => Effect.Effect<unknown, unknown>): Runner =>
    (concurrency, deadline, stats) => {
      const loop = Effect.gen(function* () {
        while (performance.now() < deadline) {
          const i = Math.floor(Math.random() * IDS)
          const started = performance.now()
          const result = yield* Effect.result(call(i, stats))
          if (result._tag === "Failure") stats.errors++
          else {
            stats.latencies.push(performance.now() - started)
            stats.calls++
          }
        }
      })
      return Effect.runPromise(
        Effect.forEach(Array.from({ length: concurrency }), () => loop, { concurrency: "unbounded", discard: true })
      )
    }

  /** The resolve script called directly with one query, as a batch of one (see resolve.lua). */
  const directResolve = (i: number): Promise<unknown> => {
    const r = requests[i]!
    const tag = tags[bucketOfId[i]!]!
    const dice = () => Math.floor(Math.random() * 2 ** 26)
    const query = [Date.now(), r.env, r.namespace, r.id, r.hostname, "", r.affinity, dice(), dice(), ""].join("\n")
    return commands["pinboard_resolve"]!(`${tag}:cold`, tag, "0", ...fixed, query)
  }

  interface Kind {
    readonly name: string
    readonly what: string
    readonly run: Runner
  }
  const KINDS: Record<string, Kind> = {
    resolve: {
      name: "resolve",
      what: "registry.resolve, one fiber per caller (the production path)",
      run: fiberCallers((i, stats) => Effect.map(registry.resolve(requests[i]!), (p) => checkPlaced(stats, p)))
    },
    trivial: {
      name: "trivial",
      what: "EVALSHA `return 1` with one key in the id's bucket, async loop per caller",
      run: promiseCallers((i) => commands["bench_trivial"]!(trivialKeys[bucketOfId[i]!]!))
    },
    trivialEffect: {
      name: "trivialEffect",
      what: "EVALSHA `return 1` with one key in the id's bucket, through Effect.tryPromise, one fiber per caller",
      run: fiberCallers((i) => Effect.tryPromise(() => commands["bench_trivial"]!(trivialKeys[bucketOfId[i]!]!)))
    },
    direct: {
      name: "direct",
      what: "the ioredis resolve command with the backend's arguments, no Effect (async loop per caller)",
      run: promiseCallers(directResolve)
    },
    backend: {
      name: "backend",
      what: "backend.resolve (Effect wrapping + decode), no Clock/Random/bucket hash, fiber per caller",
      run: fiberCallers((i, stats) =>
        Effect.map(
          backend.resolve(bucketOfId[i]!, Date.now(), { ...requests[i]!, takeover: "wind_down", r1: Math.random(), r2: Math.random() }),
          (o: ResolveOutcome) => {
            if (o._tag !== "Placed") throw new Error(o._tag)
            checkPlaced(stats, o)
          }
        )
      )
    },
    runPromise: {
      name: "runPromise",
      what: "registry.resolve through Effect.runPromise per call, async loop per caller",
      run: promiseCallers((i, stats) =>
        Effect.runPromise(registry.resolve(requests[i]!)).then((p) => checkPlaced(stats, p))
      )
    }
  }
  const kinds = onlyKinds ?? (layers ? ["resolve", "trivial", "trivialEffect", "direct", "backend", "runPromise"] : ["resolve", "trivial"])
  for (const name of kinds) if (KINDS[name] === undefined) throw new Error(`--only=: unknown kind ${name} (${Object.keys(KINDS).join(", ")})`)

  // ---------------------------------------------------------------------------------------
  // Windows

  const redisCpuSeconds = async (): Promise<number> => {
    const info = await client.info("cpu")
    const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, "m").exec(info)?.[1] ?? "0")
    return field("used_cpu_user") + field("used_cpu_sys")
  }
  const evalshaUsec = async (): Promise<{ calls: number; usec: number }> => {
    const info = await client.info("commandstats")
    const m = /^cmdstat_evalsha:calls=(\d+),usec=(\d+)/m.exec(info)
    return m === null ? { calls: 0, usec: 0 } : { calls: Number(m[1]), usec: Number(m[2]) }
  }

  interface Measured {
    readonly kind: string
    readonly concurrency: number
    readonly perSecond: number
    readonly p50: number
    readonly p99: number
    readonly errors: number
    readonly fresh: number
    /** Node CPU per call (µs), and as a share of one core. */
    readonly nodeUs: number
    readonly nodeCore: number
    /** Redis script time per call from commandstats (µs), Redis process CPU per call (µs), share of one core. */
    readonly scriptUs: number
    readonly redisUs: number
    readonly redisCore: number
  }

  const measure = async (kind: Kind, concurrency: number): Promise<Measured> => {
    await kind.run(concurrency, performance.now() + WARMUP_MS, newStats())
    await client.config("RESETSTAT")
    const redisBefore = await redisCpuSeconds()
    const stats = newStats()
    const cpuBefore = process.cpuUsage()
    const started = performance.now()
    await kind.run(concurrency, started + windowMs, stats)
    const elapsed = performance.now() - started
    const cpu = process.cpuUsage(cpuBefore)
    const redisCpu = (await redisCpuSeconds()) - redisBefore
    const script = await evalshaUsec()
    const sorted = Float64Array.from(stats.latencies).sort()
    const nodeMicros = cpu.user + cpu.system
    return {
      kind: kind.name,
      concurrency,
      perSecond: (stats.calls * 1000) / elapsed,
      p50: quantile(sorted, 0.5),
      p99: quantile(sorted, 0.99),
      errors: stats.errors,
      fresh: stats.fresh,
      nodeUs: nodeMicros / Math.max(stats.calls, 1),
      nodeCore: nodeMicros / 1000 / elapsed,
      scriptUs: script.calls > 0 ? script.usec / script.calls : 0,
      redisUs: (redisCpu * 1e6) / Math.max(stats.calls, 1),
      redisCore: (redisCpu * 1000) / elapsed
    }
  }

  console.log(`window ${windowMs / 1000} s per level and kind after a ${WARMUP_MS} ms warm-up; ${cpuNote()}`)
  const results: Array<Measured> = []
  for (const concurrency of LEVELS) {
    for (const name of kinds) results.push(await measure(KINDS[name]!, concurrency))
  }

  // ---------------------------------------------------------------------------------------
  // Report

  const find = (kind: string, c: number) => results.find((r) => r.kind === kind && r.concurrency === c)!
  const compared = kinds.includes("resolve") && kinds.includes("trivial")
  console.log("")
  if (compared) console.log(table(
    ["callers", "resolve/s", "trivial EVALSHA/s", "ratio", "resolve p50 ms", "resolve p99 ms"],
    LEVELS.map((c) => {
      const r = find("resolve", c)
      const t = find("trivial", c)
      return [String(c), fmt(r.perSecond), fmt(t.perSecond), (r.perSecond / t.perSecond).toFixed(2), r.p50.toFixed(3), r.p99.toFixed(3)]
    })
  ))
  console.log("")
  console.log("where the time goes (node/redis CPU per call in µs; core = share of one CPU during the window;")
  console.log("script = EVALSHA time inside Redis from INFO commandstats):")
  console.log(table(
    ["kind", "callers", "calls/s", "p50 ms", "p99 ms", "node µs", "node core", "redis µs", "script µs", "redis core", "errors"],
    results.map((r) => [
      r.kind,
      String(r.concurrency),
      fmt(r.perSecond),
      r.p50.toFixed(3),
      r.p99.toFixed(3),
      r.nodeUs.toFixed(1),
      r.nodeCore.toFixed(2),
      r.redisUs.toFixed(1),
      r.scriptUs.toFixed(1),
      r.redisCore.toFixed(2),
      String(r.errors + r.fresh)
    ])
  ))
  for (const name of kinds) console.log(`  ${name.padEnd(10)} ${KINDS[name]!.what}`)
  const anomalies = results.filter((r) => r.errors > 0 || r.fresh > 0)
  for (const r of anomalies) {
    console.log(`WARNING ${r.kind} at ${r.concurrency}: ${r.errors} failed calls, ${r.fresh} placed anew (expected 0)`)
  }
  if (!compared) return
  console.log("")
  const verdicts = LEVELS.map((c) => {
    const ratio = find("resolve", c).perSecond / find("trivial", c).perSecond
    return `${c} caller${c === 1 ? "" : "s"}: ${ratio.toFixed(2)} ${ratio >= TARGET ? "meets" : "MISSES"}`
  })
  console.log(`target: resolve/s >= ${TARGET} x trivial EVALSHA/s at every level; ${verdicts.join("; ")}`)
}

// ---------------------------------------------------------------------------------------
// Helpers

const quantile = (sorted: Float64Array, q: number): number =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!

const fmt = (n: number): string => Math.round(n).toLocaleString("en-US")
const rate = (n: number, ms: number): string => fmt((n * 1000) / ms)

const cpuNote = (): string => {
  const cpus = availableParallelism()
  return `${cpus} CPU${cpus === 1 ? "" : "s"} (node and redis-server share them)`
}

const table = (head: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ")
  return [line(head), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n")
}

// ---------------------------------------------------------------------------------------
// Entry: the server is stopped by its pid on every way out.

let server: RedisServer | undefined
const hardLimit = setTimeout(() => {
  console.error(`bench: over ${HARD_LIMIT_MS / 1000} s, stopping`)
  server?.stopSync()
  process.exit(1)
}, HARD_LIMIT_MS)
hardLimit.unref()
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    server?.stopSync()
    process.exit(130)
  })
}

const started = performance.now()
try {
  server = await startRedisServer()
  await main(server)
  console.log(`total ${((performance.now() - started) / 1000).toFixed(1)} s`)
} catch (error) {
  console.error("bench failed:", error)
  process.exitCode = 1
} finally {
  await server?.stop()
  clearTimeout(hardLimit)
}
