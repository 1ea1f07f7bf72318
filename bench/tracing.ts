// What traces cost on the hot path (docs/operations.md "Traces"): the built Pinboard with
// tracing off (no PINBOARD_OTLP_ENDPOINT), on (the endpoint at an OTLP/HTTP receiver in
// this process) and on at a sample ratio of 0.01 (PINBOARD_OTLP_SAMPLE_RATIO), and with
// `--compare=<dir>/dist/main.js` another build (the commit before tracing, built elsewhere),
// interleaved in the same rounds.
//
//   npm run bench:tracing                                  3 rounds, 4 s windows, 32 connections
//   npm run bench:tracing -- --compare=<dir>/dist/main.js  and the other build beside them
//   npm run bench:tracing -- --rounds=5 --seconds=5 --connections=64
//   npm run bench:tracing -- --spans                       the spans' CPU in-process instead
//                                                          (bench/tracingSpans.ts)
//
// Every Pinboard runs on the embedded registry (no Redis: its CPU would be noise here), with
// bench/worker.ts behind it, each its own process on core 1; the load generator
// (bench/load.ts, autocannon, the 64-byte GET over 8 placed ids) and this process (the
// receiver, which counts the spans it is sent) on core 0. A Pinboard's CPU time is read
// around each window, the exporter's work included. Prints, per Pinboard, the medians over the
// rounds of req/s and CPU µs per request, and the ratios on/off and off/compared.
import http from "node:http"
import type { AddressInfo } from "node:net"
import { flagArg, numberArg, textArg } from "./args.js"
import { measureLoad } from "./measure.js"
import { pinPid, stopAll, stopAllSync } from "./processes.js"
import {
  LOAD_CORE,
  placedPaths,
  register,
  startPinboard,
  startWorker,
  waitForPlacements,
  waitHealthy,
  type PinboardProc,
  type Registration
} from "./proxyTargets.js"

const ROUNDS = Math.round(numberArg("rounds", 3))
const WINDOW_S = numberArg("seconds", 4)
const CONNECTIONS = Math.round(numberArg("connections", 32))
const COMPARE = textArg("compare")

/** Counts the spans POSTed to /v1/traces (OTLP/HTTP JSON). */
const startReceiver = async (): Promise<{ readonly url: string; readonly spans: () => number; readonly close: () => void }> => {
  let spans = 0
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<unknown> }> }> }
      for (const resource of body.resourceSpans) for (const scope of resource.scopeSpans) spans += scope.spans.length
      res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans: () => spans, close: () => server.close() }
}

interface Target {
  readonly label: string
  readonly pinboard: PinboardProc
  registration?: Registration
}

interface Figure {
  readonly perSecond: number
  readonly cpuUs: number
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const main = async () => {
  pinPid(process.pid, LOAD_CORE)
  const receiver = await startReceiver()
  const { proc: worker, origin: workerOrigin } = await startWorker()
  const targets: Array<Target> = [
    { label: "tracing off", pinboard: await startPinboard("pinboard (tracing off)", {}) },
    { label: "tracing on", pinboard: await startPinboard("pinboard (tracing on)", { PINBOARD_OTLP_ENDPOINT: receiver.url }) },
    {
      label: "sampled 1%",
      pinboard: await startPinboard("pinboard (sampled 1%)", { PINBOARD_OTLP_ENDPOINT: receiver.url, PINBOARD_OTLP_SAMPLE_RATIO: "0.01" })
    }
  ]
  if (COMPARE !== undefined) targets.push({ label: "compared build", pinboard: await startPinboard("pinboard (compared)", {}, [], COMPARE) })
  for (const target of targets) {
    await waitHealthy(target.pinboard)
    target.registration = await register(target.pinboard.origin, workerOrigin)
  }
  for (const target of targets) console.log(`${target.label}: ${await waitForPlacements(target.pinboard.origin)}`)

  const figures = new Map<string, Array<Figure>>(targets.map((target) => [target.label, []]))
  const alive = [worker, ...targets.map((target) => target.pinboard.proc)]
  for (let round = 0; round < ROUNDS; round++) {
    // The order rotates every round, so that no Pinboard is always measured first.
    const order = targets.map((_, i) => targets[(i + round) % targets.length]!)
    for (const target of order) {
      const { result, cpu } = await measureLoad(
        target.label,
        {
          kind: "http",
          origins: [target.pinboard.origin],
          paths: placedPaths("small"),
          connections: CONNECTIONS,
          warmupS: 1,
          seconds: WINDOW_S
        },
        { proxy: [target.pinboard.proc.pid], worker: worker.pid, redis: [] },
        alive
      )
      if (result.non2xx > 0 || result.errors > 0) throw new Error(`${target.label}: ${result.non2xx} non-2xx, ${result.errors} errors`)
      const cpuUs = ((cpu.proxy ?? 0) * result.seconds * 1e6) / result.completed
      figures.get(target.label)!.push({ perSecond: result.perSecond, cpuUs })
      console.log(`round ${round + 1}: ${target.label.padEnd(15)} ${Math.round(result.perSecond).toString().padStart(6)} req/s  ${cpuUs.toFixed(1).padStart(6)} µs CPU/request`)
    }
  }

  const medians = new Map(
    targets.map((target) => {
      const all = figures.get(target.label)!
      return [target.label, { perSecond: median(all.map((f) => f.perSecond)), cpuUs: median(all.map((f) => f.cpuUs)) }] as const
    })
  )
  console.log(`\nmedians over ${ROUNDS} rounds (64-byte GET, ${CONNECTIONS} connections, ${WINDOW_S} s windows, Node ${process.version}):`)
  for (const [label, m] of medians) console.log(`  ${label.padEnd(15)} ${Math.round(m.perSecond).toString().padStart(6)} req/s  ${m.cpuUs.toFixed(1).padStart(6)} µs CPU/request`)
  const ratio = (a: string, b: string) => {
    const x = medians.get(a)!
    const y = medians.get(b)!
    console.log(
      `  ${a} / ${b}: req/s ${(x.perSecond / y.perSecond).toFixed(2)}, CPU per request ${(x.cpuUs / y.cpuUs).toFixed(2)} (${(x.cpuUs - y.cpuUs).toFixed(1)} µs)`
    )
  }
  ratio("tracing on", "tracing off")
  ratio("sampled 1%", "tracing off")
  if (COMPARE !== undefined) ratio("tracing off", "compared build")
  console.log(`spans received: ${receiver.spans().toLocaleString("en-US")} (3 per request traced)`)
  for (const target of targets) target.registration?.stop()
  receiver.close()
}

const stopAndExit = (code: number) => {
  stopAllSync()
  process.exit(code)
}
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => stopAndExit(130))

const run = flagArg("spans") ? () => import("./tracingSpans.js").then((m) => m.runSpanCosts()) : main

run().then(
  async () => {
    await stopAll()
    process.exit(0)
  },
  (error: unknown) => {
    console.error(error)
    stopAndExit(1)
  }
)
