// How the registry's Redis cost grows with the fleet (docs/deploy.md "Sizing"): at 10, 1,000
// and 10,000 workers of one namespace on one redis-server (16 buckets), the Redis time of a
// first-use placement, of one sweep run and of one heartbeat (summed over its buckets), read
// from `INFO commandstats`, and Pinboard's CPU per placement. Prints figures and the ratio of
// each to its 10-worker figure; it is not a test.
//
//   npm run bench:scale                        10, 1,000 and 10,000 workers
//   npm run bench:scale -- --workers=10,1000   other fleet sizes
//   npm run bench:scale -- --placements=200    new ids placed per size
//
// Starts its own redis-server on a free loopback port (no persistence) and registers the
// workers through the registry service itself (the script calls Pinboard makes), not over
// HTTP, so the figures are the registry's alone.
import { Effect } from "effect"
import { Redis } from "ioredis"
import { makeRedisBackend } from "../src/registry/Redis.js"
import { clientOptions, defineScripts } from "../src/registry/RedisConnection.js"
import { policyOf } from "../src/registry/Policy.js"
import { makeRegistry, type RegisterAnswer, type RegistryService } from "../src/registry/Registry.js"
import { startRedisServer } from "../test/support/RedisServer.js"
import { configForTests } from "../test/support/TestConfig.js"
import { numberArg, textArg } from "./args.js"
import { shiftedClock } from "./shiftedClock.js"

const BUCKETS = 16
const NAMESPACE = "/threads"
/** Long, so no lease lapses while a size is measured and no heartbeat is needed in between. */
const LEASE_MS = 600_000
/** Whatever happens, the process ends (and the server with it) after this. */
const HARD_LIMIT_MS = 30 * 60_000

const SIZES = (textArg("workers") ?? "10,1000,10000").split(",").map(Number)
if (SIZES.some((n) => !(Number.isInteger(n) && n > 0))) throw new Error("--workers= expects positive integers")
const PLACEMENTS = Math.round(numberArg("placements", 200))
const HEARTBEATS = 50

/** The usec and calls of every script call (EVALSHA) since the last reset. */
const scriptStats = async (client: Redis): Promise<{ readonly calls: number; readonly usec: number }> => {
  const info = await client.info("commandstats")
  const line = info.split("\r\n").find((l) => l.startsWith("cmdstat_evalsha:"))
  if (line === undefined) return { calls: 0, usec: 0 }
  const field = (name: string) => Number(new RegExp(`${name}=([0-9.]+)`).exec(line)?.[1] ?? 0)
  return { calls: field("calls"), usec: field("usec") }
}

/** Redis µs spent in scripts while `work` runs, and Pinboard's CPU µs for it. */
const measure = async (client: Redis, work: () => Promise<unknown>) => {
  await client.config("RESETSTAT")
  const cpu = process.cpuUsage()
  await work()
  const used = process.cpuUsage(cpu)
  const redis = await scriptStats(client)
  return { redisUs: redis.usec, calls: redis.calls, cpuUs: used.user + used.system }
}

interface Figures {
  readonly workers: number
  readonly registerS: number
  readonly placementUs: number
  readonly placementCpuUs: number
  readonly sweepUs: number
  readonly heartbeatUs: number
  readonly heartbeatCalls: number
}

const measureSize = async (client: Redis, workers: number, prefix: string): Promise<Figures> => {
  const policy = policyOf(configForTests({ leaseMs: LEASE_MS }))
  const registry: RegistryService = makeRegistry(makeRedisBackend(client, { prefix, buckets: BUCKETS, policy }), policy)
  const register = (w: number) =>
    registry.register({
      worker: `w${w}`,
      advertiseUrl: `http://10.0.${Math.floor(w / 250)}.${w % 250}:8080`,
      namespaces: [{ namespace: NAMESPACE, hostname: "", env: "" }],
      headroom: 1 + (w % 10),
      draining: false
    })
  const registerAll = Effect.forEach(Array.from({ length: workers }, (_, w) => w), register, { concurrency: 16 })
  // Every bucket's first use one lease and a second ago, so that placements are past cold start.
  await Effect.runPromise(Effect.withClock(Effect.asVoid(registerAll), shiftedClock(-(LEASE_MS + 1000))))
  const started = performance.now()
  const answers: ReadonlyArray<RegisterAnswer> = await Effect.runPromise(registerAll)
  const registerS = (performance.now() - started) / 1000

  const place = await measure(client, () =>
    Effect.runPromise(
      Effect.forEach(
        Array.from({ length: PLACEMENTS }, (_, i) => `new-${workers}-${i}`),
        (id) => registry.resolve({ env: "", namespace: NAMESPACE, id, hostname: "", caller: undefined, affinity: id, excluded: [] }),
        { discard: true }
      )
    )
  )
  const sweep = await measure(client, () => Effect.runPromise(registry.sweep))
  const beat = await measure(client, () =>
    Effect.runPromise(
      Effect.forEach(
        answers.slice(0, HEARTBEATS),
        (answer) => registry.heartbeat(answer.worker, { incarnation: answer.incarnation, headroom: 5, draining: false, degraded: false }),
        { discard: true }
      )
    )
  )
  const beats = Math.min(HEARTBEATS, answers.length)
  return {
    workers,
    registerS,
    placementUs: place.redisUs / PLACEMENTS,
    placementCpuUs: place.cpuUs / PLACEMENTS,
    sweepUs: sweep.redisUs,
    heartbeatUs: beat.redisUs / beats,
    heartbeatCalls: beat.calls / beats
  }
}

const fixed = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })

const report = (rows: ReadonlyArray<Figures>): void => {
  const first = rows[0]!
  const ratio = (value: number, base: number) => (base > 0 ? `${fixed(value / base, 1)}x` : "-")
  const table: Array<Array<string>> = [
    ["workers", "register all (s)", "Redis µs/placement", "Pinboard CPU µs/placement", "Redis µs/sweep run", "Redis µs/heartbeat", "script calls/heartbeat"],
    ...rows.map((r) => [
      fixed(r.workers),
      fixed(r.registerS, 1),
      `${fixed(r.placementUs, 1)} (${ratio(r.placementUs, first.placementUs)})`,
      `${fixed(r.placementCpuUs)} (${ratio(r.placementCpuUs, first.placementCpuUs)})`,
      `${fixed(r.sweepUs)} (${ratio(r.sweepUs, first.sweepUs)})`,
      `${fixed(r.heartbeatUs, 1)} (${ratio(r.heartbeatUs, first.heartbeatUs)})`,
      fixed(r.heartbeatCalls, 1)
    ])
  ]
  const widths = table[0]!.map((_, c) => Math.max(...table.map((row) => row[c]!.length)))
  for (const row of table) console.log(row.map((cell, c) => cell.padStart(widths[c]!)).join("  "))
  console.log(`(ratios: to the ${fixed(first.workers)}-worker figure; ${PLACEMENTS} first-use placements and ${HEARTBEATS} heartbeats per size, ${BUCKETS} buckets)`)
}

const main = async (): Promise<void> => {
  const server = await startRedisServer()
  const client = new Redis({ ...clientOptions, commandTimeout: 60_000, host: "127.0.0.1", port: server.port, lazyConnect: true })
  client.on("error", () => {
    // surfaces as failed calls
  })
  try {
    defineScripts(client)
    await client.connect()
    console.log(`redis-server pid ${server.pid} on 127.0.0.1:${server.port}`)
    const rows: Array<Figures> = []
    for (const workers of SIZES) {
      const row = await measureSize(client, workers, `scale${workers}`)
      console.log(`${fixed(workers)} workers measured (registered in ${fixed(row.registerS, 1)} s)`)
      rows.push(row)
    }
    report(rows)
  } finally {
    client.disconnect()
    await server.stop()
  }
}

setTimeout(() => {
  console.error(`bench:scale: still running after ${HARD_LIMIT_MS / 60_000} min; stopping`)
  process.exit(1)
}, HARD_LIMIT_MS).unref()

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
