// What an Effect construct costs on the request path, per request, measured: one fiber per
// "request" that suspends twice (as a forward does: the resolve, then the worker's headers),
// with and without the construct around it (bench/effectVariants.ts). The figures are the
// basis of the comments in src/pipeline/Deliver.ts and src/proxy/Deadlines.ts, and of
// docs/proxy.md "What Effect constructs cost".
//
//   npm run bench:effect                  every construct, 200,000 fibers each, 5 rounds
//   npm run bench:effect -- --fibers=50000 --rounds=3
//
// Each round runs every variant once (the order rotated every round) in batches of 128
// concurrent fibers, the suspensions resumed from setImmediate as I/O would. Prints, per
// variant, the median over rounds of µs per fiber, the rounds' range, the extra µs over the
// baseline and, for a variant that names one, over the variant it is compared with.
import { Context, Effect, Exit, References, Scope } from "effect"
import { Metrics, metricsOff } from "../src/observe/Metrics.js"
import { makeMemoryBackend } from "../src/registry/Memory.js"
import { makeSampledClock } from "../src/registry/RegistryClock.js"
import { makeDeadlines } from "../src/proxy/Deadlines.js"
import { numberArg } from "./args.js"
import { BenchService, benchService, VARIANTS, type Runtime } from "./effectVariants.js"

const FIBERS = Math.round(numberArg("fibers", 200_000))
const ROUNDS = Math.round(numberArg("rounds", 5))
const CONCURRENT = 128

type Run = (effect: Effect.Effect<unknown, unknown, BenchService>) => { addObserver(observer: (exit: Exit.Exit<unknown, unknown>) => void): unknown }
// The request fibers' context as src/http/Server.ts makes it: their services.
const services = Context.make(BenchService, benchService)
const RUNS: Record<Runtime, Run> = {
  default: Effect.runForkWith(services),
  "tracer disabled": Effect.runForkWith(Context.add(services, References.TracerEnabled, false))
}

/** µs per fiber for `FIBERS` fibers of `make()`, CONCURRENT at a time. */
const measure = (make: () => Effect.Effect<unknown, unknown, BenchService>, runtime: Runtime): Promise<number> =>
  new Promise((resolve) => {
    let started = 0
    let done = 0
    const t0 = performance.now()
    const runFork = RUNS[runtime]
    const startOne = () => {
      started++
      runFork(make()).addObserver((exit) => {
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
const made = VARIANTS.map((variant) => ({ ...variant, make: variant.make({ deadlines, registryClock }), runtime: variant.runtime ?? "default" }))
for (const { name, against } of made) {
  if (against !== undefined && !made.some((v) => v.name === against)) throw new Error(`${name}: no variant "${against}"`)
}
const figures = new Map<string, Array<number>>(made.map((v) => [v.name, []]))
// Warm-up: every variant once, not counted.
for (const variant of made) await measure(variant.make, variant.runtime)
for (let round = 0; round < ROUNDS; round++) {
  const order = made.map((_, i) => made[(i + round) % made.length]!)
  for (const variant of order) figures.get(variant.name)!.push(await measure(variant.make, variant.runtime))
}
const medianOf = (name: string) => median(figures.get(name)!)
const signed = (us: number) => (us >= 0 ? "+" : "") + us.toFixed(2)
const base = medianOf(made[0]!.name)
console.log(`${FIBERS.toLocaleString("en-US")} fibers per variant, ${CONCURRENT} at a time, median of ${ROUNDS} rounds (Node ${process.version})`)
const width = Math.max(...made.map((v) => v.name.length))
for (const variant of made) {
  const rounds = figures.get(variant.name)!
  const us = median(rounds)
  const range = `${Math.min(...rounds).toFixed(2)}–${Math.max(...rounds).toFixed(2)}`
  const against = variant.against === undefined ? "" : `  ${signed(us - medianOf(variant.against))} µs over "${variant.against}"`
  console.log(`${variant.name.padEnd(width)}  ${us.toFixed(2).padStart(6)} µs/fiber (${range})  ${signed(us - base)} µs${against}`)
}
process.exit(0)
