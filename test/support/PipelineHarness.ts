// Pinboard's instance pipeline behind a real node:http server, on the embedded registry
// under the test's clock, with a fake upstream in place of undici: the test plays the
// workers. For TestClock tests of the data plane's rules.
import http from "node:http"
import type { AddressInfo, Socket } from "node:net"
import { Context, Effect, type Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { Auth } from "../../src/auth/Auth.js"
import { AppConfig } from "../../src/AppConfig.js"
import type { PinboardConfig } from "../../src/Config.js"
import { respondToOutcome } from "../../src/http/Answer.js"
import { Backend } from "../../src/registry/Backend.js"
import { localRegistryClock, RegistryClock } from "../../src/registry/RegistryClock.js"
import { Metrics, metricsOff } from "../../src/observe/Metrics.js"
import { Tracing, tracingOff } from "../../src/observe/Tracing.js"
import { Deliver } from "../../src/pipeline/Deliver.js"
import { ClientAddress, type ClientAddressService } from "../../src/pipeline/ClientAddress.js"
import { InflightCap } from "../../src/pipeline/InflightCap.js"
import { InstancePipeline } from "../../src/pipeline/Pipeline.js"
import { Deadlines } from "../../src/proxy/Deadlines.js"
import { ForwardContext } from "../../src/proxy/ForwardContext.js"
import { Upstream } from "../../src/proxy/Upstream.js"
import * as Registry from "../../src/registry/Registry.js"
import type { FakeUpstream } from "./FakeUpstream.js"
import { configForTests } from "./TestConfig.js"

export interface Client {
  readonly response: Promise<Response>
  readonly settled: () => boolean
}

export interface HarnessOptions {
  /** How many resolves take 6 s of clock (a stalled event loop, as far as the placement's age goes). */
  readonly stallResolves?: number
  /** Registered workers; each advertises http://<worker>.test/. */
  readonly workers?: ReadonlyArray<string>
  /** Every resolve waits for this first (a slow registry, as the client sees it). */
  readonly holdResolves?: Effect.Effect<void>
  readonly config?: Partial<PinboardConfig>
  /** In place of the configured client address (a test may make it throw). */
  readonly clientAddress?: ClientAddressService
}

/** A worker registered with its cold start behind it, the server listening. */
export const pipelineHarness = (fake: FakeUpstream, options: HarnessOptions = {}) => {
  const config = configForTests(options.config ?? {})
  const harness = Effect.gen(function* () {
    const registry = yield* Registry.Registry
    const registerAll = Effect.forEach(options.workers ?? ["w1"], (worker) =>
      registry.register({
        worker,
        advertiseUrl: `http://${worker}.test/`,
        namespaces: [{ namespace: "/threads", hostname: "", env: "" }],
        headroom: 1,
        draining: false,
        callerKey: undefined
      })
    )
    yield* registerAll
    yield* TestClock.adjust(config.leaseMs + 1)
    yield* registerAll

    let stalls = options.stallResolves ?? 0
    const stalling: Registry.RegistryService = {
      ...registry,
      resolve: (request) =>
        Effect.andThen(
          options.holdResolves ?? Effect.void,
          Effect.tap(registry.resolve(request), () => (stalls-- > 0 ? TestClock.adjust(6_000) : Effect.void))
        )
    }
    const pipelineLayer = InstancePipeline.layer.pipe(
      Layer.provide(Layer.merge(Deliver.layer, ForwardContext.layer)),
      Layer.provide(Layer.mergeAll(Upstream.layerTest(fake.client), InflightCap.layer, options.clientAddress === undefined ? ClientAddress.layer : ClientAddress.layerTest(options.clientAddress), Deadlines.layer, Auth.layer, Tracing.layerTest(tracingOff), Metrics.layerTest(metricsOff))),
      Layer.provideMerge(Registry.Registry.layerTest(stalling)),
      Layer.provideMerge(AppConfig.layer(config))
    )
    const context = yield* Layer.build(pipelineLayer)
    const run = Effect.runForkWith(yield* Effect.provide(Effect.context<Registry.Registry | AppConfig>(), context))
    const pipeline = Context.get(context, InstancePipeline)
    // What the server side has done, for tests that wait on it rather than on the client.
    const responses: Array<http.ServerResponse> = []
    const fibers: Array<Fiber.Fiber<unknown, unknown>> = []
    const connections = new Set<Socket>()
    const server = http.createServer((req, res) => {
      responses.push(res)
      fibers.push(run(respondToOutcome(req, res, pipeline.request(req, res))))
    })
    server.on("connection", (socket: Socket) => {
      connections.add(socket)
      socket.once("close", () => connections.delete(socket))
    })
    yield* Effect.acquireRelease(
      Effect.callback<void>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.void))
      }),
      () =>
        Effect.sync(() => {
          server.closeAllConnections()
          server.close()
        })
    )
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const request = (path: string, init?: RequestInit): Client => {
      let settled = false
      const response = fetch(`${url}${path}`, init).finally(() => (settled = true))
      return { response, settled: () => settled }
    }
    const port = (server.address() as AddressInfo).port
    return {
      config,
      registry,
      url,
      port,
      request,
      nextCall: () => Effect.promise(fake.nextCall),
      /** Whether Pinboard has begun an answer (or cut the exchange) on any request so far. */
      answered: () => responses.some((res) => res.headersSent || res.destroyed),
      /** Whether every request so far has been handled to its end. */
      handled: () => fibers.every((fiber) => fiber.pollUnsafe() !== undefined),
      /** Client connections the server has open. */
      openConnections: () => connections.size
    }
  })
  // Built into the test's scope, so the registry's sweep and the timers' fibers outlive this setup.
  // The registry's clock is the test's Clock (TestClock under it.effect), also on Redis.
  const registry = Registry.Registry.layer.pipe(
    Layer.provide(RegistryClock.layerTest(localRegistryClock)),
    Layer.provide(Backend.layer),
    Layer.provide(Metrics.layerTest(metricsOff)),
    Layer.provideMerge(AppConfig.layer(config))
  )
  return Effect.flatMap(Layer.build(registry), (context) => Effect.provide(harness, context))
}
