// The node:http server: probes, the registry API, instance requests and upgrades;
// graceful shutdown (docs/proxy.md).
import http, { type IncomingMessage, type ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import { Cause, Context, Effect, Layer, Option, Runtime } from "effect"
import { pathOf } from "../Address.js"
import { AppConfig } from "../AppConfig.js"
import type { Auth } from "../auth/Auth.js"
import { type CatalogueError, ConnectNotImplemented, internalError, MethodNotAllowed, type Reply } from "../Errors.js"
import { makeInstancePipeline, type InstanceError } from "../pipeline/Pipeline.js"
import { CLIENT_CLOSED } from "../contract/StatusLine.js"
import { exchangeObserver, type ExchangeNote } from "../observe/Exchange.js"
import { Metrics } from "../observe/Metrics.js"
import { Tracing } from "../observe/Tracing.js"
import { InflightCap } from "../pipeline/steps/InflightCap.js"
import type { Deadlines } from "../proxy/Deadlines.js"
import type { TunnelSet } from "../proxy/Tunnel.js"
import type { Upstream } from "../proxy/Upstream.js"
import type { Registry } from "../registry/Registry.js"
import { writeBareStatus } from "./BareStatus.js"
import { messageError, type MessageError } from "./Message.js"
import { makeRequestScheduler } from "./RequestScheduler.js"
import { makeInFlight } from "../serving/Drain.js"
import { listen } from "../serving/Listen.js"
import { healthz, readyz } from "./Probes.js"
import { handleRegistry } from "./RegistryApi.js"
import { isReadMethod, writeJson, writeReply } from "./Reply.js"
import { isWebSocketOffer, serveAsRequest } from "./UpgradeOffer.js"

type Route = "healthz" | "readyz" | "registry" | "instance"

const routeOf = (url: string): Route => {
  const path = pathOf(url)
  if (path === "/healthz") return "healthz"
  if (path === "/readyz") return "readyz"
  if (path === "/registry" || path.startsWith("/registry/")) return "registry"
  return "instance"
}

const probe = <A, E>(req: IncomingMessage, answer: Effect.Effect<A, E, Registry>): Effect.Effect<A, E | MethodNotAllowed, Registry> =>
  isReadMethod(req.method) ? answer : new MethodNotAllowed()

/** Why, where the error says (a 502's cause: `connect refused`, `header overflow`...). */
const reasonOf = (error: CatalogueError): string | undefined => ("reason" in error ? error.reason : undefined)

/** A 502's why, at debug level in the error log (the access log has it too, as `reason`). */
const logBadGateway = (error: CatalogueError, note: ExchangeNote | undefined) =>
  Effect.logDebug("bad gateway").pipe(
    Effect.annotateLogs({
      error: error._tag,
      reason: reasonOf(error),
      namespace: note?.namespace,
      id: note?.id,
      worker: note?.worker,
      epoch: note?.epoch,
      cause: error.cause === undefined ? undefined : String(error.cause)
    })
  )

/**
 * Every error in a handler's channel is a catalogue error with its reply; anything else is a
 * defect, logged and answered `500 internal error`. One catch, so that a request that
 * succeeds pays for one frame and one closure.
 */
const answering = <E extends CatalogueError, R>(
  handler: Effect.Effect<unknown, E, R>,
  write: (reply: Reply) => void,
  note: ExchangeNote | undefined
): Effect.Effect<void, never, R> =>
  Effect.catchAllCause(handler, (cause) => {
    const answer = (tag: string, reply: Reply, reason: string | undefined) => {
      if (note !== undefined) {
        note.error = tag
        note.status = reply.status
        note.reason = reason
      }
      write(reply)
    }
    const failure = Cause.failureOption(cause)
    if (Option.isSome(failure)) {
      const error = failure.value
      const reply = error.reply
      const written = Effect.sync(() => answer(error._tag, reply, reasonOf(error)))
      return reply.status === 502 ? Effect.zipRight(logBadGateway(error, note), written) : written
    }
    if (Cause.isInterruptedOnly(cause)) return Effect.void
    return Effect.zipRight(Effect.logError("unhandled error", cause), Effect.sync(() => answer("InternalError", internalError, undefined)))
  })

/** `note`, if given, learns the catalogue error answered and its status. */
export const respond = <E extends CatalogueError, R>(
  req: IncomingMessage,
  res: ServerResponse,
  handler: Effect.Effect<unknown, E, R>,
  note?: ExchangeNote
) => answering(handler, (reply) => writeReply(req, res, reply), note)

/** Upgrades answer failures with a bare status line (docs/proxy.md "WebSockets"). */
export const respondBare = <E extends CatalogueError, R>(socket: Duplex, handler: Effect.Effect<unknown, E, R>, note?: ExchangeNote) =>
  answering(handler, (reply) => writeBareStatus(socket, reply), note)

export class Server extends Context.Tag("pinboard/Server")<Server, { readonly port: number }>() {
  /** Listens on `host:port` (its bound port), until the layer is released: then the shutdown below. */
  static readonly layerConfig: Layer.Layer<
    Server,
    never,
    AppConfig | Registry | Auth | Metrics | InflightCap | Upstream | Deadlines
  > = Layer.scoped(Server, Effect.suspend(() => serve))
}

const serve = Effect.gen(function* () {
  const config = yield* AppConfig
  const tracing = yield* Tracing
  // With traces on, the request fibers run with the OTLP tracer (observe/Tracing.ts).
  const runtime = yield* Effect.withScheduler(Effect.runtime<Registry | Auth | AppConfig>(), makeRequestScheduler()).pipe(
    (made) => (tracing === undefined ? made : Effect.withTracer(made, tracing.tracer))
  )
  const run = Runtime.runFork(runtime)
  const pipeline = yield* makeInstancePipeline
  let shuttingDown = false
  const tunnels: TunnelSet = new Set()
  const metrics = yield* Metrics
  const inflight = yield* InflightCap
  metrics.watch({ tunnels: () => tunnels.size, inflight: inflight.snapshot })
  const observer = exchangeObserver(metrics, config.log.access)

  // A request RFC 9112 rules out (http/Message.ts) is answered before the pipeline; an
  // instance request's answer is observed all the same.
  const instance = (req: IncomingMessage, res: ServerResponse, refused: MessageError | undefined) => {
    const note: ExchangeNote = {}
    const handler: Effect.Effect<unknown, InstanceError | MessageError> = refused ?? pipeline.request(req, res, note)
    if (!observer.idle) {
      const startedAt = performance.now()
      res.once("close", () => observer.finished(req, note, res.headersSent ? res.statusCode : CLIENT_CLOSED, startedAt))
    }
    const answer = respond(req, res, handler, note)
    return tracing === undefined ? answer : tracing.request(req, res, note, answer)
  }

  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const note: ExchangeNote = {}
    const handler: Effect.Effect<unknown, InstanceError | MessageError> = messageError(req) ?? pipeline.upgrade(req, socket, head, tunnels, note)
    let answer = respondBare(socket, handler, note)
    if (!observer.idle) {
      const startedAt = performance.now()
      answer = Effect.ensuring(answer, Effect.sync(() => observer.finished(req, note, note.status ?? CLIENT_CLOSED, startedAt)))
    }
    return tracing === undefined ? answer : tracing.upgrade(req, note, answer)
  }

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const route = routeOf(req.url ?? "/")
    const refused = messageError(req)
    if (refused !== undefined && route !== "instance") return respond(req, res, Effect.fail(refused))
    switch (route) {
      case "healthz":
        return respond(req, res, Effect.map(probe(req, healthz), (json) => writeJson(req, res, 200, json)))
      case "readyz":
        return respond(req, res, Effect.map(probe(req, readyz(() => shuttingDown)), (json) => writeJson(req, res, 200, json)))
      case "registry":
        return respond(req, res, Effect.map(handleRegistry(req), (answer) => writeJson(req, res, answer.status, answer.json)))
      case "instance":
        return instance(req, res, refused)
    }
  }

  // HTTP exchanges not yet over, so that shutdown waits for them (and only them).
  const inFlight = makeInFlight()

  // requireHostHeader: a missing Host must reach Pinboard's own check (docs/proxy.md "What every client gets").
  const server = http.createServer({ requireHostHeader: false }, (req, res) => {
    inFlight.track(res)
    // While shutting down, no connection is kept for another request.
    if (shuttingDown) res.shouldKeepAlive = false
    run(handle(req, res))
  })
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
  yield* Effect.logInfo(`pinboard listening on http://${config.host}:${port}`)

  // SIGTERM (docs/proxy.md "Shutdown"): /readyz turns 503, the listener stops accepting,
  // in-flight exchanges get shutdown.graceMs to finish, then whatever is left is closed,
  // tunnels too. main.ts logs `pinboard stopped` once every layer is released.
  yield* Effect.addFinalizer(() =>
    Effect.gen(function* () {
      shuttingDown = true
      yield* Effect.logInfo("pinboard draining").pipe(Effect.annotateLogs({ grace_ms: config.shutdown.graceMs, tunnels: tunnels.size }))
      yield* inFlight.drain(server, config.shutdown.graceMs)
      server.closeAllConnections()
      for (const tunnel of tunnels) tunnel.destroy()
    })
  )
  return { port }
})
