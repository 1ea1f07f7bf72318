// bench:scale's fleet-size scenarios, per size of one namespace's fleet:
//   placement  Redis µs per first-use placement, per sweep run and per heartbeat sent one after
//              another (the figures of docs/deploy.md "Sizing"), with ratios to the first size.
//   heartbeat  every worker heartbeats once, each at its own time spread evenly over one
//              heartbeat interval (lease / 3), concurrently, as a fleet does: Redis µs and
//              script calls per heartbeat, the Redis processes' CPU, the caller's latency.
import { Effect, Exit } from "effect"
import { bucketOf } from "../../src/contract/Bucket.js"
import type { RegisterAnswer, RegistryService } from "../../src/registry/Registry.js"
import { fixed, maxOf, meets, printTable, quantile, ratio } from "./report.js"
import { BUCKETS, makeScaleRegistry, measure, NAMESPACE, placeIds, policyFor, registerFleet, type ScaleTarget } from "./redis.js"

/** Long, so no lease lapses while a size is measured and no heartbeat is needed in between. */
const LEASE_MS = 600_000
const SEQUENTIAL_HEARTBEATS = 50
/** An id in every bucket: placed before the measured ones, so that every bucket's view has read the fleet. */
const onePerBucket = (prefix: string): ReadonlyArray<string> => {
  const ids = new Map<number, string>()
  for (let i = 0; ids.size < BUCKETS; i++) {
    const id = `${prefix}-${i}`
    const bucket = bucketOf("", NAMESPACE, id, BUCKETS)
    if (!ids.has(bucket)) ids.set(bucket, id)
  }
  return [...ids.values()]
}
/** Clients whose addresses are the affinity values of the "clients" placements. */
const CLIENTS = 16
/** The target: Redis µs per heartbeat at 10,000 workers at most a quarter of the before figure. */
const HEARTBEAT_BASELINE_US = 648
const HEARTBEAT_TARGET_US = HEARTBEAT_BASELINE_US / 4
const HEARTBEAT_TARGET_WORKERS = 10_000

export interface FleetOptions {
  readonly sizes: ReadonlyArray<number>
  readonly placements: number
  readonly heartbeatWindowMs: number
  readonly placement: boolean
  readonly heartbeat: boolean
}

interface PlacementFigures {
  readonly workers: number
  readonly registerS: number
  /** The first placements of a Pinboard that has not read the fleet yet, in all. */
  readonly warmUpRedisMs: number
  readonly warmUpCpuMs: number
  readonly placementUs: number
  readonly placementCpuUs: number
  /** Affinity values from a few clients (the rendezvous ranking of each is kept). */
  readonly clientsCpuUs: number
  readonly sweepUs: number
  readonly heartbeatUs: number
  readonly heartbeatCalls: number
}

interface RateFigures {
  readonly workers: number
  readonly windowS: number
  readonly redisUs: number
  readonly calls: number
  readonly serverCpuUs: number
  readonly cpuUs: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  readonly lateMs: number
  readonly failures: number
}

const beat = (registry: RegistryService, answer: RegisterAnswer) =>
  registry.heartbeat(answer.worker, { incarnation: answer.incarnation, headroom: 5, draining: false, degraded: false })

const placementFigures = async (
  target: ScaleTarget,
  registry: RegistryService,
  answers: ReadonlyArray<RegisterAnswer>,
  registerS: number,
  placements: number
): Promise<PlacementFigures> => {
  const workers = answers.length
  // A Pinboard reads a bucket's membership once, at its first placement there: one id per bucket first.
  const warmUp = await measure(target, () => placeIds(registry, onePerBucket(`warm-${workers}`), undefined, 1))
  // One after another, as the before figures were taken; every id its own affinity value.
  const ids = Array.from({ length: placements }, (_, i) => `new-${workers}-${i}`)
  const place = await measure(target, () => placeIds(registry, ids, undefined, 1))
  const clientIds = Array.from({ length: placements }, (_, i) => `client-${workers}-${i}`)
  const clients = await measure(target, () => placeIds(registry, clientIds, undefined, 1, (_, i) => `10.1.0.${i % CLIENTS}`))
  const sweep = await measure(target, () => Effect.runPromise(registry.sweep))
  const beats = answers.slice(0, SEQUENTIAL_HEARTBEATS)
  const beaten = await measure(target, () => Effect.runPromise(Effect.forEach(beats, (answer) => beat(registry, answer), { discard: true })))
  return {
    workers,
    registerS,
    warmUpRedisMs: warmUp.redisUs / 1000,
    warmUpCpuMs: warmUp.cpuUs / 1000,
    placementUs: place.redisUs / placements,
    placementCpuUs: place.cpuUs / placements,
    clientsCpuUs: clients.cpuUs / placements,
    sweepUs: sweep.redisUs,
    heartbeatUs: beaten.redisUs / beats.length,
    heartbeatCalls: beaten.calls / beats.length
  }
}

/** Every worker heartbeats once, the i-th at i/N of the window, without waiting for the others. */
const rateFigures = async (
  target: ScaleTarget,
  registry: RegistryService,
  answers: ReadonlyArray<RegisterAnswer>,
  windowMs: number
): Promise<RateFigures> => {
  const n = answers.length
  const latencies: Array<number> = []
  let failures = 0
  let lateMs = 0
  const measured = await measure(target, () => {
    const start = performance.now()
    const at = (answer: RegisterAnswer, i: number) =>
      Effect.gen(function* () {
        const due = start + (i * windowMs) / n
        const wait = due - performance.now()
        if (wait > 0) yield* Effect.sleep(wait)
        const sent = performance.now()
        lateMs = Math.max(lateMs, sent - due)
        const exit = yield* Effect.exit(beat(registry, answer))
        latencies.push(performance.now() - sent)
        if (Exit.isFailure(exit)) failures++
      })
    return Effect.runPromise(Effect.forEach(answers, at, { concurrency: "unbounded", discard: true }))
  })
  return {
    workers: n,
    windowS: measured.wallMs / 1000,
    redisUs: measured.redisUs / n,
    calls: measured.calls / n,
    serverCpuUs: measured.serverCpuUs / n,
    cpuUs: measured.cpuUs / n,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
    maxMs: maxOf(latencies),
    lateMs,
    failures
  }
}

const printPlacement = (rows: ReadonlyArray<PlacementFigures>, placements: number): void => {
  const first = rows[0]!
  printTable([
    [
      "workers",
      "register all (s)",
      "first reads: Redis ms, CPU ms",
      "Redis µs/placement",
      "Pinboard CPU µs/placement",
      `CPU µs, ${CLIENTS} clients`,
      "Redis µs/sweep run",
      "Redis µs/heartbeat (sequential)",
      "script calls/heartbeat"
    ],
    ...rows.map((r) => [
      fixed(r.workers),
      fixed(r.registerS, 1),
      `${fixed(r.warmUpRedisMs, 1)}, ${fixed(r.warmUpCpuMs)}`,
      `${fixed(r.placementUs, 1)} (${ratio(r.placementUs, first.placementUs)})`,
      `${fixed(r.placementCpuUs)} (${ratio(r.placementCpuUs, first.placementCpuUs)})`,
      `${fixed(r.clientsCpuUs)} (${ratio(r.clientsCpuUs, first.clientsCpuUs)})`,
      `${fixed(r.sweepUs)} (${ratio(r.sweepUs, first.sweepUs)})`,
      `${fixed(r.heartbeatUs, 1)} (${ratio(r.heartbeatUs, first.heartbeatUs)})`,
      fixed(r.heartbeatCalls, 1)
    ])
  ])
  console.log(
    `(ratios: to the ${fixed(first.workers)}-worker figure; first reads: the ${BUCKETS} placements before the measured ones, one per bucket, ` +
      `in which each bucket's membership view reads the fleet, in all; then ${placements} first-use placements one after another, ` +
      `each id its own affinity value, and ${placements} more with the addresses of ${CLIENTS} clients; up to ` +
      `${SEQUENTIAL_HEARTBEATS} heartbeats one after another per size; targets at 10,000 workers: Redis µs/placement ≤ 3x, ` +
      `Pinboard CPU ≤ 1,000 µs, sweep ≤ 2,000 µs)`
  )
}

const printRate = (rows: ReadonlyArray<RateFigures>, windowMs: number): void => {
  const first = rows[0]!
  printTable([
    [
      "workers",
      "took (s)",
      "Redis µs/heartbeat",
      `target (${fixed(HEARTBEAT_TARGET_WORKERS)}: ≤ ${fixed(HEARTBEAT_TARGET_US)})`,
      "script calls/heartbeat",
      "Redis CPU µs/heartbeat",
      "Redis busy",
      "Pinboard CPU µs/heartbeat",
      "latency p50 (ms)",
      "p99 (ms)",
      "max (ms)",
      "latest start (ms)",
      "failures"
    ],
    ...rows.map((r) => [
      fixed(r.workers),
      fixed(r.windowS, 1),
      `${fixed(r.redisUs, 1)} (${ratio(r.redisUs, first.redisUs)})`,
      r.workers === HEARTBEAT_TARGET_WORKERS ? meets(r.redisUs, HEARTBEAT_TARGET_US) : "-",
      fixed(r.calls, 1),
      fixed(r.serverCpuUs, 1),
      `${fixed((100 * r.redisUs * r.workers) / (r.windowS * 1e6), 1)}%`,
      fixed(r.cpuUs),
      fixed(r.p50Ms, 2),
      fixed(r.p99Ms, 2),
      fixed(r.maxMs, 1),
      fixed(r.lateMs, 1),
      fixed(r.failures)
    ])
  ])
  console.log(
    `(every worker heartbeats once, spread evenly over ${fixed(windowMs)} ms, the heartbeat interval of a ${fixed(windowMs * 3)} ms lease, ` +
      `concurrently; Redis µs: script commands' usec in INFO commandstats / heartbeats; Redis CPU: the Redis processes' ` +
      `user+sys CPU (INFO cpu), I/O included / heartbeats (commandstats usec is time inside Redis, a CPU-starved Redis's ` +
      `waits included); Redis busy: script time / time taken; latest start: the most a heartbeat was sent after its time; ` +
      `target: ≤ 1/4 of the before figure ${HEARTBEAT_BASELINE_US} µs; ratios: to the ${fixed(first.workers)}-worker figure)`
  )
  for (const r of rows) {
    if (r.lateMs > windowMs / 10) {
      console.log(
        `  ${fixed(r.workers)} workers: this process fell behind the fleet's rate (${fixed(r.workers / (r.windowS || 1))}/s sent of ` +
          `${fixed((r.workers * 1000) / windowMs)}/s due; Pinboard CPU ${fixed(r.cpuUs)} µs a heartbeat): its figures are of an overloaded run`
      )
    }
  }
}

/** Registers each size of fleet (prefix `<name><size>`) and prints the figures chosen. */
export const runFleet = async (target: ScaleTarget, name: string, options: FleetOptions): Promise<void> => {
  const placementRows: Array<PlacementFigures> = []
  const rateRows: Array<RateFigures> = []
  for (const workers of options.sizes) {
    const registry = makeScaleRegistry(target.client, `${name}${workers}`, policyFor(LEASE_MS))
    const members = Array.from({ length: workers }, (_, w) => ({ worker: `w${w}`, headroom: 1 + (w % 10) }))
    const started = performance.now()
    const answers = await registerFleet(registry, members)
    const registerS = (performance.now() - started) / 1000
    if (options.placement) placementRows.push(await placementFigures(target, registry, answers, registerS, options.placements))
    if (options.heartbeat) rateRows.push(await rateFigures(target, registry, answers, options.heartbeatWindowMs))
    console.log(`${fixed(workers)} workers of ${NAMESPACE} measured (registered in ${fixed(registerS, 1)} s)`)
  }
  if (options.placement) {
    console.log("\nFirst-use placement, sweep run, heartbeats one after another:")
    printPlacement(placementRows, options.placements)
  }
  if (options.heartbeat) {
    console.log("\nHeartbeats at the fleet's rate:")
    printRate(rateRows, options.heartbeatWindowMs)
  }
}
