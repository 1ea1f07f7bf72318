// What an Effect construct costs on the request path, per request, measured: one fiber per
// "request" that suspends twice (as a forward does: the resolve, then the worker's headers),
// with and without the construct around it. The figures are the basis of the comments in
// src/pipeline/Policies.ts and src/proxy/Deadlines.ts, and of docs/proxy.md "What a request costs".
//
//   npm run bench:effect                  every construct, 200,000 fibers each, 5 rounds
//   npm run bench:effect -- --fibers=50000 --rounds=3
//
// Each round runs every variant once (the order rotated every round) in batches of 128
// concurrent fibers, the suspensions resumed from setImmediate as I/O would. Prints, per
// variant, the median over rounds of µs per fiber and the extra µs over the baseline.
import { Clock, Context, Duration, Effect, Exit, Schedule, Scheduler, Scope } from "effect"
import { Metrics, metricsOff } from "../src/observe/Metrics.js"
import { makeMemoryBackend } from "../src/registry/Memory.js"
import { makeSampledClock, type RegistryClockService } from "../src/registry/RegistryClock.js"
import { RE_RESOLVE, REFUSAL_RE_PLACE, retryAfterFailure } from "../src/pipeline/Policies.js"
import { makeDeadlines, type DeadlinesService } from "../src/proxy/Deadlines.js"
import { ConnectFailed, Refused, StaleResolve } from "../src/proxy/Signals.js"
import { makeRequestScheduler } from "../src/http/RequestScheduler.js"
import { numberArg } from "./args.js"

const FIBERS = Math.round(numberArg("fibers", 200_000))
const ROUNDS = Math.round(numberArg("rounds", 5))
const CONCURRENT = 128

/** A suspension resumed from the event loop, as a socket or Redis reply would resume it. */
const io: Effect.Effect<number> = Effect.callback<number>((resume) => {
  setImmediate(() => resume(Effect.succeed(1)))
})

/** Two suspensions: the shape of one forward (resolve, then headers). */
const request: Effect.Effect<number, StaleResolve> = Effect.flatMap(io, () => io)

/** The same request typed as one that may also fail the ways a forward does (for catchTags). */
const forward: Effect.Effect<number, StaleResolve | Refused | ConnectFailed> = request

/** A fiber-local setting with a default, as References.* are: read from the fiber's context. */
const Setting = Context.Reference<number>("bench/Setting", { defaultValue: () => 0 })

/** The "+ Effect.gen" body, as a function made by Effect.fn (named: a span and a stack frame), Effect.fn (unnamed: a stack frame) and Effect.fnUntraced. */
const twoSuspensions = function* () {
  const a = yield* io
  const b = yield* io
  return a + b + (yield* Effect.succeed(0))
}
const namedFn = Effect.fn("bench.request")(twoSuspensions)
const unnamedFn = Effect.fn(twoSuspensions)
const untracedFn = Effect.fnUntraced(twoSuspensions)

/** What the variants are given: made once, as the process makes them at start-up. */
interface Made {
  readonly deadlines: DeadlinesService
  readonly registryClock: RegistryClockService
}

type Variant = {
  readonly name: string
  readonly make: (made: Made) => () => Effect.Effect<unknown, unknown>
  /** Forked on a runtime with the request scheduler (src/http/RequestScheduler.ts) instead of Effect's default. */
  readonly requestScheduler?: boolean
}

const VARIANTS: ReadonlyArray<Variant> = [
  { name: "baseline: one fiber, two suspensions", make: () => () => request },
  { name: "baseline on the request scheduler", make: () => () => request, requestScheduler: true },
  { name: "+ Effect.gen around it (3 yields)", make: () => () => Effect.gen(function* () {
    const a = yield* io
    const b = yield* io
    return a + b + (yield* Effect.succeed(0))
  }) },
  { name: '+ Effect.fn("bench.request") around it (3 yields, a span)', make: () => () => namedFn() },
  { name: "+ Effect.fn around it, unnamed (3 yields)", make: () => () => unnamedFn() },
  { name: "+ Effect.fnUntraced around it (3 yields)", make: () => () => untracedFn() },
  { name: "+ Effect.retry(RE_RESOLVE), no retry", make: () => () => Effect.retry(request, RE_RESOLVE) },
  { name: "+ Effect.retry(REFUSAL_RE_PLACE), no retry", make: () => () => Effect.retry(request, REFUSAL_RE_PLACE) },
  { name: "+ both retries, nested", make: () => () => {
    const inner: Effect.Effect<number, StaleResolve> = Effect.retry(request, RE_RESOLVE)
    return Effect.retry(inner, REFUSAL_RE_PLACE)
  } },
  { name: "+ retryAfterFailure(RE_RESOLVE), no retry", make: () => () => retryAfterFailure(request, RE_RESOLVE) },
  { name: "+ both, as Deliver.ts applies them", make: () => () => {
    const inner: Effect.Effect<number, StaleResolve> = retryAfterFailure(request, RE_RESOLVE)
    return retryAfterFailure(inner, REFUSAL_RE_PLACE)
  } },
  { name: "+ catchTag recursion (the hand-written retry)", make: () => () => Effect.catchTag(request, "StaleResolve", () => request) },
  { name: "+ catchTags, two tags (as Deliver.ts ends)", make: () => () => Effect.catchTags(forward, {
    Refused: () => Effect.succeed(0),
    ConnectFailed: () => Effect.succeed(0)
  }) },
  { name: "+ Effect.timeout(30 s)", make: () => () => Effect.timeout(request, Duration.seconds(30)) },
  { name: "+ the wall clock's time first (Clock.currentTimeMillis)", make: () => () => Effect.flatMap(Clock.currentTimeMillis, () => request) },
  { name: "+ a Context.Reference read first (its default)", make: () => () => Effect.flatMap(Setting, () => request) },
  { name: "+ Effect.provideService of a Context.Reference around it (was Effect.locally)", make: () => () => Effect.provideService(request, Setting, 1) },
  { name: "+ the registry clock's time first (a sampled reading)", make: ({ registryClock }) => () => Effect.flatMap(registryClock.now, () => request) },
  { name: "+ a Deadlines timer started and cancelled", make: ({ deadlines }) => () => Effect.suspend(() => {
    const timer = deadlines.timer(() => undefined)
    timer.start(30_000)
    return Effect.ensuring(request, Effect.sync(() => timer.cancel()))
  }) },
  { name: "+ Effect.acquireRelease-style ensuring (a finalizer)", make: () => () => Effect.ensuring(request, Effect.void) },
  { name: "+ 10 more flatMaps", make: () => () => {
    let effect: Effect.Effect<number, StaleResolve> = request
    for (let i = 0; i < 10; i++) effect = Effect.flatMap(effect, (n) => Effect.succeed(n + 1))
    return effect
  } },
  { name: "+ Schedule.fixed repeat driver, 1 step", make: () => () => Effect.repeat(request, Schedule.recurs(0)) }
]

const runForkDefault = Effect.runFork
// The request fibers' context as src/http/Server.ts makes it: Effect's defaults, but the scheduler.
const runForkScheduled = Effect.runForkWith(
  await Effect.runPromise(Effect.provideService(Effect.context<never>(), Scheduler.Scheduler, makeRequestScheduler()))
)

/** µs per fiber for `FIBERS` fibers of `make()`, CONCURRENT at a time. */
const measure = (make: () => Effect.Effect<unknown, unknown>, requestScheduler = false): Promise<number> =>
  new Promise((resolve) => {
    let started = 0
    let done = 0
    const t0 = performance.now()
    const runFork = requestScheduler ? runForkScheduled : runForkDefault
    const startOne = () => {
      started++
      runFork(make()).addObserver((exit: Exit.Exit<unknown, unknown>) => {
        if (Exit.isFailure(exit)) throw new Error("a measured fiber failed")
        done++
        if (started < FIBERS) startOne()
        else if (done === FIBERS) resolve(((performance.now() - t0) * 1000) / FIBERS)
      })
    }
    for (let i = 0; i < Math.min(CONCURRENT, FIBERS); i++) startOne()
  })

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

// In a scope never closed: the timers' and the clock sampler's fibers live as long as the process.
const scope = await Effect.runPromise(Scope.make())
const deadlines = await Effect.runPromise(Scope.provide(makeDeadlines, scope))
const policy = { leaseMs: 15_000, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: 15_000 }
const registryClock = await Effect.runPromise(
  Scope.provide(makeSampledClock(makeMemoryBackend(1, policy), 1000), scope).pipe(Effect.provide(Metrics.layerTest(metricsOff)))
)
const made = VARIANTS.map((variant) => ({ name: variant.name, make: variant.make({ deadlines, registryClock }), requestScheduler: variant.requestScheduler === true }))
const figures = new Map<string, Array<number>>(made.map((v) => [v.name, []]))
// Warm-up: every variant once at a tenth of the size.
for (const variant of made) await measure(variant.make, variant.requestScheduler)
for (let round = 0; round < ROUNDS; round++) {
  const order = made.map((_, i) => made[(i + round) % made.length]!)
  for (const variant of order) figures.get(variant.name)!.push(await measure(variant.make, variant.requestScheduler))
}
const base = median(figures.get(made[0]!.name)!)
console.log(`${FIBERS.toLocaleString("en-US")} fibers per variant, ${CONCURRENT} at a time, median of ${ROUNDS} rounds (Node ${process.version})`)
const width = Math.max(...made.map((v) => v.name.length))
for (const variant of made) {
  const us = median(figures.get(variant.name)!)
  console.log(`${variant.name.padEnd(width)}  ${us.toFixed(2).padStart(6)} µs/fiber  ${(us - base >= 0 ? "+" : "") + (us - base).toFixed(2)} µs`)
}
process.exit(0)
