// Traces (docs/operations.md "Traces"): with `otlp.endpoint` set, each instance request is a
// server span, continued from the request's `traceparent`, with a `resolve` and a `forward`
// span under it for every attempt; the forward names itself in the `traceparent` the worker
// gets. Spans are exported as OTLP/HTTP JSON (serving/Otlp.ts). Off, the
// service is undefined and the request path is built without any of it. A request that
// brings no decision of its caller is traced at `otlp.sampleRatio`.
import { randomFillSync } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import { Context, Effect, Exit, FiberRef, Layer, Random, type Scope, Tracer } from "effect"
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
    Effect.flatMap(AppConfig, ({ otlp }) => (otlp.endpoint === undefined ? Effect.succeed(undefined) : makeTracing(otlp.endpoint, otlp.sampleRatio)))
  )
}

// Spans are made with options fixed here: no stack trace is captured for them.
const SERVER = { kind: "server", captureStackTrace: false } as const
const RESOLVE = { captureStackTrace: false } as const
const CLIENT = { kind: "client", captureStackTrace: false } as const

/**
 * Whether the request fiber is traced. Untraced, resolve and forward make no spans, and the
 * worker gets `passOn` as its traceparent: undefined, the caller's as received; for a new trace
 * left out by the ratio, one saying it was not sampled, so that the workers leave it out too.
 */
type RequestTrace = { readonly traced: true } | { readonly traced: false; readonly passOn: string | undefined }

const requestTrace = FiberRef.unsafeMake<RequestTrace>({ traced: true })
const CALLER_UNSAMPLED: RequestTrace = { traced: false, passOn: undefined }

// A trace id and a span id (24 random bytes) per request left out by the ratio, from a pool
// refilled once per 256 of them: a crypto call per request showed in the profile.
const IDS_BYTES = 24
const idPool = Buffer.alloc(IDS_BYTES * 256)
let idPoolAt = idPool.length

const unsampledTraceParent = (): string => {
  if (idPoolAt === idPool.length) {
    randomFillSync(idPool)
    idPoolAt = 0
  }
  const ids = idPool.toString("hex", idPoolAt, (idPoolAt += IDS_BYTES))
  return formatTraceParent(ids.slice(0, 32), ids.slice(32), false)
}

export const makeTracing = (endpoint: string, sampleRatio = 1): Effect.Effect<TracingService, never, Scope.Scope> =>
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

    /**
     * The request's span, continued from its `traceparent`. A caller that did not sample it is
     * left untraced, and so is a new trace that the ratio leaves out.
     */
    const inSpan = <E, R>(
      req: IncomingMessage,
      answer: Effect.Effect<void, E, R>,
      run: (span: Tracer.Span, answer: Effect.Effect<void, E, R>) => Effect.Effect<void, E, R>
    ): Effect.Effect<void, E, R> => {
      const caller = parseTraceParent(req.headers[TRACEPARENT_HEADER])
      if (caller !== undefined && !caller.sampled) return Effect.locally(answer, requestTrace, CALLER_UNSAMPLED)
      const options = caller === undefined ? SERVER : { ...SERVER, parent: Tracer.externalSpan(caller) }
      const traced = Effect.flatMap(Effect.makeSpan("instance request", options), (span) => {
        span.attribute("http.request.method", req.method ?? "GET")
        return run(span, Effect.withParentSpan(answer, span))
      })
      if (caller !== undefined || sampleRatio === 1) return traced
      return Effect.flatMap(Random.next, (draw) =>
        draw < sampleRatio ? traced : Effect.locally(answer, requestTrace, { traced: false, passOn: unsampledTraceParent() })
      )
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
        Effect.flatMap(FiberRef.get(requestTrace), (trace) =>
          trace.traced
            ? Effect.useSpan("resolve", RESOLVE, (span) =>
                Effect.tap(resolving, (placement) => {
                  span.attribute("pinboard.worker", placement.worker)
                  span.attribute("pinboard.epoch", placement.epoch)
                  span.attribute("pinboard.placed", placement.isNew)
                })
              )
            : resolving
        ),
      forward: (placement, send) =>
        Effect.flatMap(FiberRef.get(requestTrace), (trace) =>
          trace.traced
            ? Effect.useSpan("forward", CLIENT, (span) => {
                span.attribute("pinboard.worker", placement.worker)
                span.attribute("pinboard.epoch", placement.epoch)
                return send(formatTraceParent(span.traceId, span.spanId, true))
              })
            : send(trace.passOn)
        )
    }
  })
