// The node:http servers: the data plane (probes, the registry API, instance requests and
// upgrades; over TLS with `tls.cert` and `tls.key`; HTTP/2 by ALPN there, or h2c on a plain
// listener, each stream served as an HTTP/1.1 request) and, with `registry.port`, the registry
// API's own listener (probes and `/registry/*`, then absent from the data plane); graceful
// shutdown (docs/proxy.md).
import type { IncomingMessage, ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import type https from "node:https"
import { Context, Effect, Layer, Result, Scheduler, type Scope } from "effect"
import { pathOf } from "../Address.js"
import { CLIENT_CLOSED } from "../contract/StatusLine.js"
import { AppConfig } from "../AppConfig.js"
import { ConnectNotImplemented, MethodNotAllowed, RouteNotFound } from "../Errors.js"
import { InstancePipeline } from "../pipeline/Pipeline.js"
import { exchangeObserver } from "../observe/Exchange.js"
import { Metrics } from "../observe/Metrics.js"
import { Tracing } from "../observe/Tracing.js"
import { ClientAddress } from "../pipeline/ClientAddress.js"
import { InflightCap } from "../pipeline/InflightCap.js"
import type { TunnelSet } from "../proxy/Tunnel.js"
import type { Registry } from "../registry/Registry.js"
import { answerOutcome, type Outcome, refusedOutcome, respond } from "./Answer.js"
import { writeBareStatus } from "./BareStatus.js"
import { messageError, type MessageError } from "./Message.js"
import { makeRequestScheduler } from "./RequestScheduler.js"
import { makeInFlight } from "../serving/Drain.js"
import { listen } from "../serving/Listen.js"
import { acceptProxyProtocol } from "../serving/ProxyProtocol.js"
import { handOffByAlpn, handOffByPreface } from "../serving/Http2Handoff.js"
import { makeHttp2Connections, type Http2Connections } from "../serving/Http2Server.js"
import { listenerTlsOptions, loadTlsPair, reloadTlsOnChange, tlsFilesOf, type TlsFiles } from "../serving/Tls.js"
import { createServer, createTlsServer, delayUnless, nextStopSignal, type ServerTimeouts } from "./Listener.js"
import { asHttp1Exchange } from "./Http2Request.js"
import { healthz, readyz } from "./Probes.js"
import { handleRegistry } from "./RegistryApi.js"
import { isReadMethod, writeJson, writeReply } from "./Reply.js"
import { isWebSocketOffer, serveAsRequest } from "./UpgradeOffer.js"

type DataPlaneRoute = "healthz" | "readyz" | "registry" | "instance"

const routeOf = (url: string): DataPlaneRoute => {
  const path = pathOf(url)
  if (path === "/healthz") return "healthz"
  if (path === "/readyz") return "readyz"
  if (path === "/registry" || path.startsWith("/registry/")) return "registry"
  return "instance"
}

const probe = <A, E>(req: IncomingMessage, answer: Effect.Effect<A, E, Registry>): Effect.Effect<A, E | MethodNotAllowed, Registry> =>
  isReadMethod(req.method) ? answer : new MethodNotAllowed()

export class Server extends Context.Service<Server, { readonly port: number }>()("pinboard/Server") {
  /** Listens on `host:port` (its bound port), until the layer is released: then the shutdown below. */
  static readonly layer: Layer.Layer<Server, never, AppConfig | Registry | InstancePipeline | Metrics | InflightCap | Tracing | ClientAddress> =
    Layer.effect(Server, Effect.suspend(() => serve))
}

const serve = Effect.gen(function* () {
  const config = yield* AppConfig
  const tracing = yield* Tracing
  // The request fibers run on the request scheduler and, with traces on, with the OTLP tracer
  // (observe/Tracing.ts): both in the context they are forked with.
  const context = yield* tracing.withTracer(
    Effect.provideService(Effect.context<Registry | AppConfig>(), Scheduler.Scheduler, makeRequestScheduler())
  )
  const run = Effect.runForkWith(context)
  const pipeline = yield* InstancePipeline
  let shuttingDown = false
  const tunnels: TunnelSet = new Set()
  const metrics = yield* Metrics
  const inflight = yield* InflightCap
  metrics.watch({ tunnels: () => tunnels.size, inflight: inflight.snapshot })
  const observer = exchangeObserver(metrics, { metrics: config.metrics.port !== undefined, accessLog: config.log.access }, (yield* ClientAddress).of)

  // An instance request is answered, then observed once its response is closed: counted,
  // logged and its span ended from the outcome's facts.
  const instance = (req: IncomingMessage, res: ServerResponse, refused: MessageError | undefined) =>
    tracing.request(req, observer, (observing) => {
      const observed = observing.http(req, res)
      const outcome: Effect.Effect<Outcome> = refused === undefined ? pipeline.request(req, res) : refusedOutcome(refused)
      return Effect.flatMap(outcome, (done) =>
        Effect.map(
          answerOutcome(done, (reply) => writeReply(req, res, reply)),
          (answer) => observed(done, answer)
        )
      )
    })

  // An upgrade is observed when its answer is over: the tunnel open, or the bare status written.
  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) =>
    tracing.request(req, observer, (observing) => {
      const observed = observing.upgrade(req)
      const refused = messageError(req)
      const outcome: Effect.Effect<Outcome> = refused === undefined ? pipeline.upgrade(req, socket, head, tunnels) : refusedOutcome(refused)
      return Effect.flatMap(outcome, (done) =>
        Effect.map(
          answerOutcome(done, (reply) => writeBareStatus(socket, reply)),
          (answer) => observed(done, answer, done.upgradeStatus ?? answer?.status ?? CLIENT_CLOSED)
        )
      )
    })

  const registry = (req: IncomingMessage, res: ServerResponse) =>
    respond(req, res, Effect.map(handleRegistry(req), (answer) => writeJson(req, res, answer.status, answer.json)))
  const notFound = (req: IncomingMessage, res: ServerResponse) => respond(req, res, Effect.fail(new RouteNotFound()))
  const probes = (req: IncomingMessage, res: ServerResponse, route: "healthz" | "readyz") =>
    route === "healthz"
      ? respond(req, res, Effect.map(probe(req, healthz), (json) => writeJson(req, res, 200, json)))
      : respond(req, res, Effect.map(probe(req, readyz(() => shuttingDown)), (json) => writeJson(req, res, 200, json)))

  /**
   * A listener's routes: the probes on every one; `/registry/*` where `registryHere`, instance
   * requests where `instancesHere`; anything else `404 not found`. A malformed request is
   * refused at once, but an instance request's refusal is observed like any of its answers.
   */
  const handlerFor = (registryHere: boolean, instancesHere: boolean) => (req: IncomingMessage, res: ServerResponse) => {
    const route = routeOf(req.url ?? "/")
    const refused = messageError(req)
    if (refused !== undefined && !(instancesHere && route === "instance")) return respond(req, res, Effect.fail(refused))
    switch (route) {
      case "healthz":
      case "readyz":
        return probes(req, res, route)
      case "registry":
        return registryHere ? registry(req, res) : notFound(req, res)
      case "instance":
        return instancesHere ? instance(req, res, refused) : notFound(req, res)
    }
  }
  // The registry API answers on the data port, or only on its own listener when it has one.
  const registryApart = config.registry.port !== undefined

  // HTTP exchanges not yet over, so that shutdown waits for them (and only them).
  const inFlight = makeInFlight()
  const tracked = (handler: (req: IncomingMessage, res: ServerResponse) => Effect.Effect<void, never, Registry | AppConfig>) =>
    (req: IncomingMessage, res: ServerResponse) => {
      inFlight.track(res)
      // While shutting down, no connection is kept for another request.
      if (shuttingDown) res.shouldKeepAlive = false
      run(handler(req, res))
    }

  // The data plane speaks TLS with tls.cert and tls.key (the registry's own listener never does).
  const tls = tlsFilesOf(config.tls)
  const dataPlane = tracked(handlerFor(!registryApart, true))
  const http2 = tls === undefined ? config.http2.h2c : config.http2.enabled
  const server = tls === undefined ? createServer(config.server, dataPlane) : yield* tlsServer(config.server, dataPlane, tls, http2, run)
  // HTTP/2 streams are served as the HTTP/1.1 requests they map to; CONNECT is refused as on HTTP/1.1.
  const h2: Http2Connections | undefined = http2
    ? makeHttp2Connections(
        { ...config.http2, idleTimeoutMs: config.server.keepAliveTimeoutMs },
        (stream, answer) => {
          const { req, res } = asHttp1Exchange(stream, answer)
          dataPlane(req, res)
        },
        (stream, answer) => {
          const { req, res } = asHttp1Exchange(stream, answer)
          writeReply(req, res, new ConnectNotImplemented().reply)
        },
        {
          draining: () => shuttingDown,
          resetFlood: (peer) =>
            run(
              Effect.logWarning("http2 connection closed: too many streams cancelled before their answer").pipe(
                Effect.annotateLogs({ peer, burst: config.http2.streamResetBurst, rate: config.http2.streamResetRate })
              )
            )
        }
      )
    : undefined
  if (h2 !== undefined) {
    if (tls === undefined) handOffByPreface(server, h2.accept, { timeoutMs: config.server.headersTimeoutMs })
    else handOffByAlpn(server as https.Server, h2.accept)
  }
  if (config.proxyProtocol) acceptProxyProtocol(server, { timeoutMs: config.server.headersTimeoutMs })
  // Every WebSocket upgrade is an instance request, `/healthz` and `/registry/*` included (seed
  // "WebSockets"); any other offer is served as the ordinary request it also is.
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!isWebSocketOffer(req.headers.upgrade)) return serveAsRequest(server, req, socket, head)
    socket.on("error", () => socket.destroy())
    run(upgrade(req, socket, head))
  })
  // Pinboard is no forward proxy: a bare status line, then the connection closes.
  server.on("connect", (_req: IncomingMessage, socket: Duplex) => {
    socket.on("error", () => socket.destroy())
    writeBareStatus(socket, new ConnectNotImplemented().reply)
  })
  const port = yield* Effect.orDie(listen(server, config.port, config.host))
  yield* Effect.logInfo(`pinboard listening on ${tls === undefined ? "http" : "https"}://${config.host}:${port}`)
  const registryServer = registryApart ? createServer(config.server, tracked(handlerFor(true, false))) : undefined
  if (registryServer !== undefined) {
    const host = config.registry.host ?? config.host
    const registryPort = yield* Effect.orDie(listen(registryServer, config.registry.port!, host))
    yield* Effect.logInfo(`pinboard registry API listening on http://${host}:${registryPort}`)
  }

  // SIGTERM (docs/proxy.md "Shutdown"): /readyz turns 503; requests are still served for
  // shutdown.drainDelayMs (a second signal ends that), then the listeners stop accepting,
  // in-flight exchanges get shutdown.graceMs to finish, then whatever is left is closed,
  // tunnels too. cli/Main.ts logs `pinboard stopped` once every layer is released.
  yield* Effect.addFinalizer(() =>
    Effect.gen(function* () {
      shuttingDown = true
      const { drainDelayMs, graceMs } = config.shutdown
      if (drainDelayMs > 0) {
        yield* Effect.scoped(
          Effect.gen(function* () {
            const secondSignal = yield* nextStopSignal
            yield* Effect.logInfo("pinboard not ready, still serving").pipe(Effect.annotateLogs({ drain_delay_ms: drainDelayMs }))
            yield* delayUnless(drainDelayMs, secondSignal)
          })
        )
      }
      yield* Effect.logInfo("pinboard draining").pipe(Effect.annotateLogs({ grace_ms: graceMs, tunnels: tunnels.size }))
      const servers = registryServer === undefined ? [server] : [server, registryServer]
      h2?.closeAll()
      yield* inFlight.drain(servers, graceMs)
      for (const each of servers) each.closeAllConnections()
      h2?.destroyAll()
      for (const tunnel of tunnels) tunnel.destroy()
    })
  )
  return { port }
})

/**
 * The data plane's TLS listener; renewed certificate files are taken for new connections, on
 * SIGHUP and when they change, until the scope closes (serving/Tls.ts).
 */
const tlsServer = (
  timeouts: ServerTimeouts,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  files: TlsFiles,
  http2: boolean,
  run: (effect: Effect.Effect<void>) => unknown
): Effect.Effect<https.Server, never, Scope.Scope> =>
  Effect.gen(function* () {
    // Config.ts has loaded this pair once already: a failure now is a file changed meanwhile.
    const pair = yield* Result.match(loadTlsPair(files), {
      onFailure: (problem) => Effect.die(new Error(`tls.${problem.field}: ${problem.message}`)),
      onSuccess: Effect.succeed
    })
    const server = createTlsServer(timeouts, handler, listenerTlsOptions(pair, http2))
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        reloadTlsOnChange(files, (renewed) => server.setSecureContext(renewed), {
          loaded: (trigger) => run(Effect.logInfo("tls certificate loaded").pipe(Effect.annotateLogs({ trigger, cert: files.cert }))),
          refused: (trigger, problem) =>
            run(
              Effect.logWarning("tls certificate refused, the one in use is kept").pipe(
                Effect.annotateLogs({ trigger, field: `tls.${problem.field}`, reason: problem.message })
              )
            )
        })
      ),
      (stop) => Effect.sync(stop)
    )
    return server
  })
