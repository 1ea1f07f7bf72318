// The node:http servers: the data plane (probes, the registry API, instance requests and
// upgrades; over TLS with `tls.cert` and `tls.key`; HTTP/2 by ALPN there, or h2c on a plain
// listener, each stream served as an HTTP/1.1 request) and, with `registry.port`, the registry
// API's own listener (probes and `/registry/*`, then absent from the data plane); graceful
// shutdown (docs/proxy.md).
import type { IncomingMessage, ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import type https from "node:https"
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../AppConfig.js"
import { ConnectNotImplemented } from "../Errors.js"
import { InstancePipeline } from "../pipeline/Pipeline.js"
import { exchangeObserver } from "../observe/Exchange.js"
import { Metrics } from "../observe/Metrics.js"
import { Tracing } from "../observe/Tracing.js"
import { ClientAddress } from "../pipeline/ClientAddress.js"
import { InflightCap } from "../pipeline/InflightCap.js"
import type { TunnelSet } from "../proxy/Tunnel.js"
import type { Registry } from "../registry/Registry.js"
import { makeInFlight } from "../serving/Drain.js"
import { listen } from "../serving/Listen.js"
import { acceptProxyProtocol } from "../serving/ProxyProtocol.js"
import { handOffByAlpn, handOffByPreface } from "../serving/Http2Handoff.js"
import { makeHttp2Connections, type Http2Connections } from "../serving/Http2Server.js"
import { tlsFilesOf } from "../serving/Tls.js"
import { createServer, delayUnless, nextStopSignal } from "./Listener.js"
import { tlsServer } from "./TlsListener.js"
import { asHttp1Exchange } from "./Http2Request.js"
import { writeReply } from "./Reply.js"
import { Auth } from "../auth/Auth.js"
import { Credentials } from "../auth/Credentials.js"
import { makeRoutes } from "./Routes.js"
import { writeBareStatus } from "./BareStatus.js"
import { isWebSocketOffer, serveAsRequest } from "./UpgradeOffer.js"

export class Server extends Context.Service<Server, { readonly port: number }>()("pinboard/Server") {
  /** Listens on `host:port` (its bound port), until the layer is released: then the shutdown below. */
  static readonly layer: Layer.Layer<Server, never, AppConfig | Registry | Credentials | Auth | InstancePipeline | Metrics | InflightCap | Tracing | ClientAddress> =
    Layer.effect(Server, Effect.suspend(() => serve))
}

const serve = Effect.gen(function* () {
  const config = yield* AppConfig
  const tracing = yield* Tracing
  // With traces on, the request fibers run with the OTLP tracer (observe/Tracing.ts), in the
  // context they are forked with.
  const context = yield* tracing.withTracer(Effect.context<Registry | AppConfig | Credentials | Auth>())
  const run = Effect.runForkWith(context)
  const pipeline = yield* InstancePipeline
  let shuttingDown = false
  const tunnels: TunnelSet = new Set()
  const metrics = yield* Metrics
  const inflight = yield* InflightCap
  metrics.watch({ tunnels: () => tunnels.size, inflight: inflight.snapshot })
  const observer = exchangeObserver(metrics, { metrics: config.metrics.port !== undefined, accessLog: config.log.access }, (yield* ClientAddress).of)

  const { handlerFor, upgrade } = makeRoutes({ pipeline, tracing, observer, tunnels, shuttingDown: () => shuttingDown })

  // The registry API answers on the data port, or only on its own listener when it has one.
  const registryApart = config.registry.port !== undefined

  // HTTP exchanges not yet over, so that shutdown waits for them (and only them).
  const inFlight = makeInFlight()
  const tracked = (handler: (req: IncomingMessage, res: ServerResponse) => Effect.Effect<void, never, Registry | AppConfig | Credentials | Auth>) =>
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
