// Two builds of Pinboard, A and B, measured in pairs of short windows, so that a change of
// 10% can be told from this machine's noise (a target's rate moves up to 2x between the
// rounds of `npm run bench`, and slowly: two windows a few seconds apart see the same machine).
//
//   npm run bench:ab -- --b=<dir>/dist/main.js                 this build (A) against another (B)
//   npm run bench:ab -- --a=<dir>/dist/main.js --b=<dir>/dist/main.js
//   npm run bench:ab -- --b=... --pairs=30 --seconds=3 --connections=128 --path=large --warmup=3
//
// Both serve the same ids of one worker on one redis-server (B shares A's registry), on core
// 1; wrk on core 0 (bench/wrk.ts). Each pair measures A then B, or B then A (alternating),
// and gives B's rate and CPU per request over A's. Prints the median and the spread (the
// middle half) of the pairs' ratios: the same build on both sides shows the noise floor.
import { startRedisServer } from "../test/support/RedisServer.js"
import { flagArg, numberArg, textArg } from "./args.js"
import { measureHttp } from "./measure.js"
import { pinPid, stopAll } from "./processes.js"
import { median } from "./proxyReport.js"
import { getLoad, LOAD_CORE, register, SERVER_CORE, startPinboard, startWorker, waitForPlacements, waitHealthy } from "./proxyTargets.js"

const A_MAIN = textArg("a")
const B_MAIN = textArg("b")
const PAIRS = Math.round(numberArg("pairs", 20))
const SECONDS = Math.round(numberArg("seconds", 2))
const CONNECTIONS = Math.round(numberArg("connections", 32))
const PATH = textArg("path") ?? "small"
const QUIET = flagArg("quiet")
/** Windows of each side before the pairs, not counted: the first seconds run code V8 has not optimized yet. */
const WARMUP_WINDOWS = Math.round(numberArg("warmup", 3))

if (B_MAIN === undefined) throw new Error("usage: npm run bench:ab -- --b=<dir>/dist/main.js [--a=<dir>/dist/main.js] [--pairs=N] [--seconds=N] [--connections=N] [--path=small|large|huge]")

const quartile = (sorted: ReadonlyArray<number>, q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
const spread = (values: ReadonlyArray<number>): string => {
  const sorted = [...values].sort((x, y) => x - y)
  return `${median(values).toFixed(3)} (middle half ${quartile(sorted, 0.25).toFixed(3)} to ${quartile(sorted, 0.75).toFixed(3)})`
}

const redis = await startRedisServer()
try {
  pinPid(process.pid, LOAD_CORE)
  pinPid(redis.pid, SERVER_CORE)
  const { proc: worker, origin: workerOrigin } = await startWorker()
  const env = { PINBOARD_REDIS_URL: redis.url }
  const a = await startPinboard("A", env, [], A_MAIN)
  const b = await startPinboard("B", env, [], B_MAIN)
  await Promise.all([waitHealthy(a), waitHealthy(b)])
  const registration = await register(a.origin, workerOrigin)
  console.log(await waitForPlacements(a.origin))
  console.log(`A ${A_MAIN ?? "this build"}; B ${B_MAIN}; ${PAIRS} pairs of ${SECONDS} s windows, ${CONNECTIONS} connections, GET .../${PATH}`)
  const measure = async (side: typeof a) => {
    const { result, cpu } = await measureHttp(side.proc.name, getLoad(side.origin, PATH, CONNECTIONS, SECONDS), { proxy: [side.proc.pid], worker: worker.pid, redis: [redis.pid] }, [worker, a.proc, b.proc])
    if (result.errors > 0 || result.non2xx > 0) throw new Error(`${side.proc.name}: ${result.errors} errors, ${result.non2xx} non-2xx`)
    return { rate: result.perSecond, cpuUs: ((cpu.proxy ?? 0) * 1e6) / result.perSecond, other: cpu.others }
  }
  for (let i = 0; i < WARMUP_WINDOWS; i++) {
    await measure(a)
    await measure(b)
  }
  const rates: Array<number> = []
  const cpus: Array<number> = []
  for (let pair = 0; pair < PAIRS; pair++) {
    const [first, second] = pair % 2 === 0 ? [a, b] : [b, a]
    const one = await measure(first)
    const two = await measure(second)
    const [ma, mb] = first === a ? [one, two] : [two, one]
    rates.push(mb.rate / ma.rate)
    cpus.push(mb.cpuUs / ma.cpuUs)
    if (!QUIET) {
      console.log(
        `pair ${String(pair + 1).padStart(2)}: A ${Math.round(ma.rate)}/s ${ma.cpuUs.toFixed(0)} µs, B ${Math.round(mb.rate)}/s ${mb.cpuUs.toFixed(0)} µs; ` +
          `B/A rate ${(mb.rate / ma.rate).toFixed(3)}, CPU ${(mb.cpuUs / ma.cpuUs).toFixed(3)}; other ${Math.max(ma.other, mb.other).toFixed(2)}`
      )
    }
  }
  registration.stop()
  console.log(`B / A, rate:             ${spread(rates)}`)
  console.log(`B / A, CPU per request:  ${spread(cpus)}`)
} finally {
  await stopAll()
  await redis.stop()
}
