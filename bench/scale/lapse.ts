// bench:scale's lapse scenario: a worker holding many rows lapses while the sweep runs on its
// schedule and clients resolve ids placed on another worker. Workers A and B (equal headroom)
// in one namespace; B's ids placed with caller "B", then `rows` ids with caller "A" (caller
// preference puts them on A). A stops heartbeating; through a client with Pinboard's own options
// (1 s command timeout, as one Pinboard has) B keeps heartbeating every heartbeatMs, the sweep
// runs on RegistrySweep.ts's `sweepSchedule` (every half lease, the first a quarter lease after A's
// last heartbeat, so that the run that finds A lapsed comes a quarter lease after), and RESOLVE_LOOPS loops resolve B's
// ids, until DBSIZE is back to where it was before A's rows (or LAPSE_TIMEOUT_LEASES leases).
import { Cause, Effect, Exit, Fiber, Option, Schedule } from "effect"
import type { RegisterAnswer, RegistryService } from "../../src/registry/Registry.js"
import { sweepSchedule } from "../../src/registry/RegistrySweep.js"
import { fixed, maxOf, meets, printTable, quantile, ratio, seconds } from "./report.js"
import {
  dbSize,
  flushAll,
  makeScaleRegistry,
  NAMESPACE,
  placeIds,
  policyFor,
  readSlowlog,
  registerFleet,
  startSlowlog,
  type ScaleTarget
} from "./redis.js"

const B_IDS = 1000
const PLACE_CONCURRENCY = 64
const RESOLVE_LOOPS = 16
const LAPSE_TIMEOUT_LEASES = 4
const SLOWLOG_SLOWER_THAN_US = 1000
const POLL_MS = 100
/** DBSIZE counts as back once A's keys are down to this share of what they were. */
const KEYS_LEFT = 0.01
const TARGET_REDIS_MS = 5
const TARGET_RESOLVE_MS = 50

export interface LapseFigures {
  readonly rows: number
  readonly placeS: number
  readonly longestRedisMs: number
  readonly longestCommand: string
  readonly slowCommands: number
  readonly resolveMaxMs: number
  readonly resolveP99Ms: number
  readonly resolveP50Ms: number
  readonly quietP99Ms: number
  readonly quietMaxMs: number
  readonly resolves: number
  readonly failures: number
  readonly failureTags: string
  readonly goneS: number
  readonly sweepRuns: number
  readonly sweepMaxMs: number
  readonly sweepFailures: number
  /** When each sweep started, from A's lease expiry, and how long the caller waited. */
  readonly sweepTimes: string
  readonly bFailures: number
}

interface Sample {
  readonly at: number
  readonly ms: number
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const heartbeatOf = (registry: RegistryService, answer: RegisterAnswer) =>
  registry.heartbeat(answer.worker, { incarnation: answer.incarnation, headroom: 5, draining: false, degraded: false })

const measureLapse = async (target: ScaleTarget, rows: number, leaseMs: number): Promise<LapseFigures> => {
  await flushAll(target)
  const prefix = `lapse${rows}`
  const policy = policyFor(leaseMs)
  const setup = makeScaleRegistry(target.client, prefix, policy)
  const [a, b] = await registerFleet(setup, [
    { worker: "A", headroom: 5 },
    { worker: "B", headroom: 5 }
  ])
  const heartbeatMs = a!.heartbeatMs
  let aExpires = a!.leaseExpiresAt
  // Both heartbeat through the bench's client while the rows are placed.
  const beatBoth = Effect.all([heartbeatOf(setup, a!), heartbeatOf(setup, b!)]).pipe(
    Effect.tap(([answer]) => Effect.sync(() => (aExpires = answer.leaseExpiresAt)))
  )
  let beating = true
  const setupBeats = Effect.runFork(
    Effect.repeat(
      Effect.delay(beatBoth, heartbeatMs).pipe(Effect.catch((error) => Effect.sync(() => console.log(`  heartbeat failed while placing: ${error._tag}`)))),
      { while: () => beating }
    )
  )

  const bIds = Array.from({ length: B_IDS }, (_, i) => `b-${i}`)
  const onB = (await placeIds(setup, bIds, "B", PLACE_CONCURRENCY)).filter((w) => w === "B").length
  const keysBefore = await dbSize(target)
  const placing = performance.now()
  const aIds = Array.from({ length: rows }, (_, i) => `a-${i}`)
  const onA = (await placeIds(setup, aIds, "A", PLACE_CONCURRENCY)).filter((w) => w === "A").length
  const placeS = (performance.now() - placing) / 1000
  const keysWithA = await dbSize(target)
  console.log(
    `  ${fixed(rows)} rows: ${fixed(onA)} of ${fixed(rows)} ids placed on A in ${fixed(placeS, 1)} s, ${fixed(onB)} of ${fixed(B_IDS)} on B; ` +
      `keys ${fixed(keysBefore)} before A's rows, ${fixed(keysWithA)} with them`
  )

  // The lapse: A's heartbeats stop; from now on, one Pinboard's client.
  const pinboard = makeScaleRegistry(await target.pinboardClient(), prefix, policy)
  // The loop ends after one more heartbeat of both: A's lease runs out one lease after it.
  beating = false
  await Effect.runPromise(Fiber.join(setupBeats))
  await startSlowlog(target, SLOWLOG_SLOWER_THAN_US)
  // A's lease as the registry holds it (its answer to `workers`), beside the last heartbeat's answer.
  const held = (await Effect.runPromise(setup.workers)).find((w) => w.worker === "A")?.leaseExpiresAt ?? aExpires
  if (held !== aExpires) console.log(`  A's lease as the registry holds it: ${held - aExpires} ms past its last heartbeat's answer`)
  const lapseAt = Math.max(held, aExpires)
  let bFailures = 0
  const bBeats = Effect.runFork(
    Effect.repeat(
      Effect.delay(heartbeatOf(pinboard, b!), heartbeatMs).pipe(Effect.catch(() => Effect.sync(() => void bFailures++))),
      Schedule.forever
    )
  )
  const sweeps: Array<number> = []
  const sweepRuns: Array<string> = []
  let sweepFailures = 0
  const sweepOnce = Effect.suspend(() => {
    const started = performance.now()
    const at = Date.now()
    return pinboard.sweep.pipe(
      Effect.catch(() => Effect.sync(() => void sweepFailures++)),
      Effect.ensuring(
        Effect.sync(() => {
          const ms = performance.now() - started
          sweeps.push(ms)
          sweepRuns.push(`${fixed((at - lapseAt) / 1000, 1)} s (${fixed(ms)} ms)`)
        })
      )
    )
  })
  // First a quarter lease from now, then on the schedule: the run that finds A lapsed comes a quarter
  // lease after its expiry, neither just before (a whole half lease more) nor just after it.
  const sweeper = Effect.runFork(Effect.delay(Effect.repeat(sweepOnce, sweepSchedule(leaseMs)), leaseMs / 4))

  const samples: Array<Sample> = []
  const failures = new Map<string, number>()
  let running = true
  const loop = async () => {
    while (running) {
      const id = bIds[Math.floor(Math.random() * bIds.length)]!
      const started = performance.now()
      const exit = await Effect.runPromiseExit(
        pinboard.resolve({ env: "", namespace: NAMESPACE, id, hostname: "", caller: undefined, affinity: id, excluded: [] })
      )
      samples.push({ at: Date.now(), ms: performance.now() - started })
      const tag = Exit.isSuccess(exit) ? (exit.value.worker === "B" ? undefined : `moved to ${exit.value.worker}`) : failureTag(exit.cause)
      if (tag !== undefined) failures.set(tag, (failures.get(tag) ?? 0) + 1)
    }
  }
  const loops = Array.from({ length: RESOLVE_LOOPS }, loop)

  const threshold = keysBefore + KEYS_LEFT * (keysWithA - keysBefore)
  const deadline = lapseAt + LAPSE_TIMEOUT_LEASES * leaseMs
  let goneAt = Number.NaN
  while (Date.now() < deadline) {
    if ((await dbSize(target)) <= threshold) {
      goneAt = Date.now()
      break
    }
    await sleep(POLL_MS)
  }
  await sleep(500)
  running = false
  await Promise.all(loops)
  await Effect.runPromise(Fiber.interrupt(sweeper))
  await Effect.runPromise(Fiber.interrupt(bBeats))
  const slow = await readSlowlog(target)
  const keysAfter = await dbSize(target)
  if (Number.isNaN(goneAt)) {
    console.log(`  A's rows not gone ${LAPSE_TIMEOUT_LEASES} leases after the lapse: ${fixed(keysAfter)} keys (looked for ≤ ${fixed(threshold)})`)
  }

  const all = samples.map((s) => s.ms)
  const quiet = samples.filter((s) => s.at < lapseAt).map((s) => s.ms)
  const failureCount = [...failures.values()].reduce((x, y) => x + y, 0)
  return {
    rows,
    placeS,
    longestRedisMs: (slow[0]?.durationUs ?? 0) / 1000,
    longestCommand: slow[0]?.command ?? "-",
    slowCommands: slow.filter((s) => s.durationUs > TARGET_REDIS_MS * 1000).length,
    resolveMaxMs: maxOf(all),
    resolveP99Ms: quantile(all, 0.99),
    resolveP50Ms: quantile(all, 0.5),
    quietP99Ms: quantile(quiet, 0.99),
    quietMaxMs: maxOf(quiet),
    resolves: samples.length,
    failures: failureCount,
    failureTags: [...failures].map(([tag, n]) => `${tag} ${n}`).join(", "),
    goneS: (goneAt - lapseAt) / 1000,
    sweepRuns: sweeps.length,
    sweepMaxMs: maxOf(sweeps),
    sweepFailures,
    sweepTimes: sweepRuns.join(", "),
    bFailures
  }
}

const failureTag = (cause: Cause.Cause<{ readonly _tag: string }>): string =>
  Option.match(Cause.findErrorOption(cause), { onNone: () => "defect", onSome: (error) => error._tag })

export const runLapse = async (target: ScaleTarget, rowCounts: ReadonlyArray<number>, leaseMs: number): Promise<void> => {
  const results: Array<LapseFigures> = []
  for (const rows of rowCounts) results.push(await measureLapse(target, rows, leaseMs))
  console.log("\nA worker holding many rows lapses:")
  printTable([
    [
      "A's rows",
      "longest Redis call (ms)",
      "target ≤ 5",
      "longest resolve (ms)",
      "target ≤ 50",
      "resolve p99 (ms)",
      "p99 / before lapse",
      "p50 (ms)",
      "resolves",
      "failures",
      "target 0",
      "lapse to rows gone (s)",
      "sweep runs",
      "longest sweep call (ms)"
    ],
    ...results.map((r) => [
      fixed(r.rows),
      `${fixed(r.longestRedisMs, 1)} (${r.longestCommand})`,
      meets(r.longestRedisMs, TARGET_REDIS_MS),
      fixed(r.resolveMaxMs, 1),
      meets(r.resolveMaxMs, TARGET_RESOLVE_MS),
      fixed(r.resolveP99Ms, 2),
      ratio(r.resolveP99Ms, r.quietP99Ms),
      fixed(r.resolveP50Ms, 2),
      fixed(r.resolves),
      r.failures === 0 ? "0" : `${fixed(r.failures)} (${r.failureTags})`,
      meets(r.failures, 0),
      fixed(r.goneS, 1),
      `${fixed(r.sweepRuns)}${r.sweepFailures > 0 ? ` (${r.sweepFailures} failed)` : ""}`,
      fixed(r.sweepMaxMs, 1)
    ])
  ])
  for (const r of results) {
    console.log(
      `  ${fixed(r.rows)} rows: before A's lease ran out resolve p99 ${fixed(r.quietP99Ms, 2)} ms, max ${fixed(r.quietMaxMs, 1)} ms; ` +
        `Redis commands over ${TARGET_REDIS_MS} ms: ${fixed(r.slowCommands)}; B's heartbeat failures: ${r.bFailures}; rows placed in ${seconds(r.placeS * 1000)}`
    )
    console.log(`    sweeps started at (from A's lease expiry): ${r.sweepTimes}`)
  }
  console.log(
    `(lease ${fixed(leaseMs)} ms, heartbeat every ${fixed(Math.floor(leaseMs / 3))} ms, sweep every ${fixed(leaseMs / 2)} ms as ` +
      `RegistrySweep.ts sweepSchedule, the first a quarter lease after A's last heartbeat; ${RESOLVE_LOOPS} loops resolve B's ${B_IDS} ids through a client ` +
      `with Pinboard's options (1 s command timeout), shared with B's heartbeats and the sweep as in one Pinboard; longest Redis ` +
      `call: SLOWLOG (slower than ${SLOWLOG_SLOWER_THAN_US} µs) from A's last heartbeat until half a second after the rows were gone; ` +
      `rows gone: DBSIZE back within ${KEYS_LEFT * 100}% of A's keys of its level before A's rows, polled every ${POLL_MS} ms, ` +
      `timed from A's lease expiry; a failure is a resolve that did not answer B (RegistryUnavailable is a 503))`
  )
}
