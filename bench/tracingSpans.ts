// `npm run bench:tracing -- --spans`: what the spans of one traced request cost in CPU, in
// this process alone, where the end-to-end figures of bench/tracing.ts are noisy. A fiber per
// "request" suspends twice (the resolve, then the worker's headers) as bench/effectCosts.ts
// has it; traced, it runs through src/observe/Tracing.ts as the server and Deliver.ts do
// (request span, resolve span, forward span with its traceparent, the request span ended on
// the response's close), with the OTLP exporter sending to a receiver in a child process.
// Prints the median over rounds of CPU µs per request (this process's user + system time,
// the exporter's batching, serialization and sending included) for each variant.
//
//   npm run bench:tracing -- --spans [--fibers=100000] [--rounds=5]
import type { IncomingMessage } from "node:http"
import { Effect, Exit, Scope } from "effect"
import { exchangeObserver, type ExchangeFacts } from "../src/observe/Exchange.js"
import { metricsOff } from "../src/observe/Metrics.js"
import { makeTracing, tracingOff, type TracingService } from "../src/observe/Tracing.js"
import type { Placement } from "../src/registry/Registry.js"
import { spawnProcess } from "../test/support/Processes.js"
import { numberArg } from "./args.js"

const FIBERS = Math.round(numberArg("fibers", 100_000))
const ROUNDS = Math.round(numberArg("rounds", 5))
const CONCURRENT = 128

const RECEIVER = `
const http = require("node:http")
http.createServer((req, res) => { req.resume(); req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}")) })
  .listen(0, "127.0.0.1", function () { console.log("listening " + this.address().port) })
`

const PLACEMENT: Placement = { env: "", worker: "w1", advertiseUrl: "http://w1.test", epoch: "1796008889542000001", isNew: false }

const io = <A>(value: A): Effect.Effect<A> => Effect.callback<A>((resume) => void setImmediate(() => resume(Effect.succeed(value))))

/** No metrics and no access log: what the observer records is the span alone. */
const NOT_RECORDING = exchangeObserver(metricsOff, { metrics: false, accessLog: false }, () => "127.0.0.1")

const fakeRequest = (traceparent: string | undefined) => {
  const req = { method: "GET", headers: traceparent === undefined ? {} : { traceparent } } as unknown as IncomingMessage
  return req
}

/**
 * A request as Server.ts and Deliver.ts run it, the response closed at its end: with
 * `tracing`, through its wrappers, the request span ended as the observer ends it.
 */
const requestOf = (tracing: TracingService, traceparent: string | undefined) => () => {
  const req = fakeRequest(traceparent)
  return tracing.request(req, NOT_RECORDING, (observer) => {
    const observed = observer.upgrade(req)
    const answer = Effect.flatMap(tracing.resolve(io(PLACEMENT)), (placement) =>
      Effect.as(
        tracing.forward(placement, (sent) => io(sent)),
        { namespace: "/threads", id: "t1", worker: placement.worker, epoch: placement.epoch, upgradeStatus: undefined, client: "127.0.0.1" } satisfies ExchangeFacts
      )
    )
    return Effect.map(answer, (facts) => observed(facts, undefined, 200))
  })
}

export const runSpanCosts = async (): Promise<void> => {
  const receiver = spawnProcess(process.execPath, ["-e", RECEIVER], {}, { name: "receiver" })
  const port = Number((await receiver.waitForLine(/^listening (\d+)$/, 10_000))[1])
  const scope = await Effect.runPromise(Scope.make())
  const tracing = await Effect.runPromise(Scope.provide(makeTracing(`http://127.0.0.1:${port}`), scope))
  const sampledOut = await Effect.runPromise(Scope.provide(makeTracing(`http://127.0.0.1:${port}`, 0), scope))
  // The request fibers' context as src/http/Server.ts makes it: with traces on, the tracer.
  const requestContext = () => Effect.context<never>()
  const runOff = Effect.runForkWith(await Effect.runPromise(requestContext()))
  const runOn = Effect.runForkWith(await Effect.runPromise(tracing.withTracer(requestContext())))

  const variants = [
    { name: "tracing off: no spans", run: runOff, make: requestOf(tracingOff, undefined) },
    { name: "tracing on: request, resolve, forward spans", run: runOn, make: requestOf(tracing, undefined) },
    { name: "tracing on, continuing a client's traceparent", run: runOn, make: requestOf(tracing, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01") },
    { name: "tracing on, the client's traceparent unsampled", run: runOn, make: requestOf(tracing, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00") },
    { name: "tracing on, no traceparent, left out by sampleRatio 0", run: runOn, make: requestOf(sampledOut, undefined) }
  ]

  /** CPU µs of this process per fiber. */
  const measure = (run: typeof runOff, make: () => Effect.Effect<unknown, unknown>, fibers: number): Promise<number> =>
    new Promise((resolve) => {
      let started = 0
      let done = 0
      const cpu0 = process.cpuUsage()
      const startOne = () => {
        started++
        run(make()).addObserver((exit: Exit.Exit<unknown, unknown>) => {
          if (Exit.isFailure(exit)) throw new Error("a measured fiber failed")
          done++
          if (started < fibers) startOne()
          else if (done === fibers) {
            const cpu = process.cpuUsage(cpu0)
            resolve((cpu.user + cpu.system) / fibers)
          }
        })
      }
      for (let i = 0; i < Math.min(CONCURRENT, fibers); i++) startOne()
    })

  for (const variant of variants) await measure(variant.run, variant.make, FIBERS / 10)
  const figures = new Map<string, Array<number>>(variants.map((v) => [v.name, []]))
  for (let round = 0; round < ROUNDS; round++) {
    for (const variant of variants.map((_, i) => variants[(i + round) % variants.length]!)) {
      figures.get(variant.name)!.push(await measure(variant.run, variant.make, FIBERS))
    }
  }
  const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[values.length >> 1]!
  const off = median(figures.get(variants[0]!.name)!)
  console.log(`${FIBERS.toLocaleString("en-US")} requests per variant, ${CONCURRENT} at a time, median of ${ROUNDS} rounds (Node ${process.version}); CPU of this process:`)
  const width = Math.max(...variants.map((v) => v.name.length))
  for (const variant of variants) {
    const us = median(figures.get(variant.name)!)
    console.log(`${variant.name.padEnd(width)}  ${us.toFixed(2).padStart(6)} µs/request  ${(us - off >= 0 ? "+" : "") + (us - off).toFixed(2)} µs`)
  }
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await receiver.kill()
}
