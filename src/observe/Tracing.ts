// Traces (docs/operations.md "Traces"): with `otlp.endpoint` set, each instance request is a
// server span, continued from the request's `traceparent`, with a `resolve` and a `forward`
// span under it for every attempt; the forward names itself in the `traceparent` the worker
// gets. Spans are exported as OTLP/HTTP JSON (serving/Otlp.ts). Off, the
// service is undefined and the request path is built without any of it.
import type { IncomingMessage, ServerResponse } from "node:http"
import { Context, Effect, Exit, Layer, type Scope, Tracer } from "effect"
import { AppConfig } from "../AppConfig.js"
import { formatTraceParent, parseTraceParent, TRACEPARENT_HEADER } from "../contract/TraceParent.js"
import { CLIENT_CLOSED } from "../contract/StatusLine.js"
import type { ExchangeNote } from "./Exchange.js"
import { makeOtlpTracer } from "../serving/Otlp.js"

/** What a span says of a placement (the registry's Placement has these, and more). */
interface PlacementSeen {
  readonly worker: string
  readonly epoch: string
  readonly isNew: boolean
}

export interface TracingService {
  /** The tracer the request fibers run with. */
  readonly tracer: Tracer.Tracer
  /** Runs an instance request's answer in its span, which ends when `res` closes. */
  readonly request: <E, R>(req: IncomingMessage, res: ServerResponse, note: ExchangeNote, answer: Effect.Effect<void, E, R>) => Effect.Effect<void, E, R>
  /** Runs an upgrade's answer in its span, which ends with it (the tunnel open, or the bare status written). */
  readonly upgrade: <E, R>(req: IncomingMessage, note: ExchangeNote, answer: Effect.Effect<void, E, R>) => Effect.Effect<void, E, R>
  readonly resolve: <P extends PlacementSeen, E, R>(resolving: Effect.Effect<P, E, R>) => Effect.Effect<P, E, R>
  /** `send` gets the `traceparent` naming the forward span (undefined when the request is not traced). */
  readonly forward: <A, E, R>(placement: PlacementSeen, send: (traceparent: string | undefined) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export class Tracing extends Context.Reference<Tracing>()("pinboard/Tracing", {
  defaultValue: (): TracingService | undefined => undefined
}) {
  /** On when `otlp.endpoint` is set; what is not yet exported is sent when the layer is released. */
  static readonly layerConfig: Layer.Layer<Tracing, never, AppConfig> = Layer.scoped(
    Tracing,
    Effect.flatMap(AppConfig, (config) => (config.otlp.endpoint === undefined ? Effect.succeed(undefined) : makeTracing(config.otlp.endpoint)))
  )
}

// Spans are made with options fixed here: no stack trace is captured for them.
const SERVER = { kind: "server", captureStackTrace: false } as const
const RESOLVE = { captureStackTrace: false } as const
const CLIENT = { kind: "client", captureStackTrace: false } as const

export const makeTracing = (endpoint: string): Effect.Effect<TracingService, never, Scope.Scope> =>
  Effect.gen(function* () {
    const tracer = yield* makeOtlpTracer(endpoint, { serviceName: "pinboard" })
    const clock = yield* Effect.clock

    /** The note's namespace, id, worker, epoch and error, and the status; a 5xx marks the span failed. */
    const end = (span: Tracer.Span, note: ExchangeNote, status: number) => {
      if (note.namespace !== undefined) span.attribute("pinboard.namespace", note.namespace)
      if (note.id !== undefined) span.attribute("pinboard.id", note.id)
      if (note.worker !== undefined) span.attribute("pinboard.worker", note.worker)
      if (note.epoch !== undefined) span.attribute("pinboard.epoch", note.epoch)
      if (note.error !== undefined) span.attribute("pinboard.error", note.error)
      span.attribute("http.response.status_code", status)
      span.end(clock.unsafeCurrentTimeNanos(), status >= 500 ? Exit.fail(note.error ?? `status ${status}`) : Exit.void)
    }

    /** The request's span, continued from its `traceparent`; a caller that did not sample it is left untraced. */
    const inSpan = <E, R>(
      req: IncomingMessage,
      answer: Effect.Effect<void, E, R>,
      run: (span: Tracer.Span, answer: Effect.Effect<void, E, R>) => Effect.Effect<void, E, R>
    ): Effect.Effect<void, E, R> => {
      const caller = parseTraceParent(req.headers[TRACEPARENT_HEADER])
      if (caller !== undefined && !caller.sampled) return Effect.withTracerEnabled(answer, false)
      const options = caller === undefined ? SERVER : { ...SERVER, parent: Tracer.externalSpan(caller) }
      return Effect.flatMap(Effect.makeSpan("instance request", options), (span) => {
        span.attribute("http.request.method", req.method ?? "GET")
        return run(span, Effect.withParentSpan(answer, span))
      })
    }

    return {
      tracer,
      request: (req, res, note, answer) =>
        inSpan(req, answer, (span, traced) => {
          res.once("close", () => end(span, note, res.headersSent ? res.statusCode : CLIENT_CLOSED))
          return traced
        }),
      upgrade: (req, note, answer) =>
        inSpan(req, answer, (span, traced) => Effect.ensuring(traced, Effect.sync(() => end(span, note, note.status ?? CLIENT_CLOSED)))),
      resolve: (resolving) =>
        Effect.useSpan("resolve", RESOLVE, (span) =>
          Effect.tap(resolving, (placement) => {
            span.attribute("pinboard.worker", placement.worker)
            span.attribute("pinboard.epoch", placement.epoch)
            span.attribute("pinboard.placed", placement.isNew)
          })
        ),
      forward: (placement, send) =>
        Effect.useSpan("forward", CLIENT, (span) => {
          span.attribute("pinboard.worker", placement.worker)
          span.attribute("pinboard.epoch", placement.epoch)
          // A request left untraced runs with a no-op span (unsampled): its traceparent goes on as received.
          return send(span.sampled ? formatTraceParent(span.traceId, span.spanId, true) : undefined)
        })
    }
  })
