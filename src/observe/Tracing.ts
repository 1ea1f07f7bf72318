// Traces (docs/operations.md "Traces"): with `otlp.endpoint` set, each instance request is a
// server span, continued from the request's `traceparent`, with a `resolve` and a `forward`
// span under it for every attempt; the forward names itself in the `traceparent` the worker
// gets. Spans are exported as OTLP/HTTP JSON (serving/Otlp.ts). Off, every call of the
// service hands its effect on as it is. A request that brings no decision of its caller is
// traced at `otlp.sampleRatio`. The request span is ended by the exchange's observer
// (Exchange.ts), with the facts the access line has.
import { randomFillSync } from "node:crypto"
import type { IncomingMessage } from "node:http"
import { Clock, Context, Effect, Exit, Layer, Random, type Scope, Tracer } from "effect"
import { AppConfig } from "../AppConfig.js"
import { formatTraceParent, parseTraceParent, TRACEPARENT_HEADER } from "../contract/TraceParent.js"
import type { ExchangeFacts, ExchangeObserver, OwnAnswer } from "./Exchange.js"
import { makeOtlpTracer } from "../serving/Otlp.js"

/** What a span says of a placement (the registry's Placement has these, and more). */
interface PlacementSeen {
  readonly worker: string
  readonly epoch: string
  readonly isNew: boolean
}

export interface TracingService {
  /** The server's request fibers, run with the OTLP tracer (on) or as they are (off). */
  readonly withTracer: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Runs an instance request or upgrade in its span: `answer` is given the observer that also ends it. */
  readonly request: <A, E, R>(
    req: IncomingMessage,
    observer: ExchangeObserver,
    answer: (observer: ExchangeObserver) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
  readonly resolve: <P extends PlacementSeen, E, R>(resolving: Effect.Effect<P, E, R>) => Effect.Effect<P, E, R>
  /** `send` gets the `traceparent` naming the forward span (undefined when the request is not traced). */
  readonly forward: <A, E, R>(placement: PlacementSeen, send: (traceparent: string | undefined) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export const tracingOff: TracingService = {
  withTracer: (effect) => effect,
  request: (_req, observer, answer) => answer(observer),
  resolve: (resolving) => resolving,
  forward: (_placement, send) => send(undefined)
}

export class Tracing extends Context.Service<Tracing, TracingService>()("pinboard/Tracing") {
  /** On when `otlp.endpoint` is set; what is not yet exported is sent when the layer is released. */
  static readonly layer: Layer.Layer<Tracing, never, AppConfig> = Layer.effect(
    Tracing,
    Effect.flatMap(AppConfig, ({ otlp }) => (otlp.endpoint === undefined ? Effect.succeed(tracingOff) : makeTracing(otlp.endpoint, otlp.sampleRatio)))
  )

  static readonly layerTest = (tracing: TracingService): Layer.Layer<Tracing> => Layer.succeed(Tracing, tracing)
}

// Spans are made with options fixed here: no stack trace is captured for them (Effect 4 takes
// none when a span is made; a parent span is provided with NO_STACK).
const SERVER = { kind: "server" } as const
const RESOLVE = {} as const
const CLIENT = { kind: "client" } as const
const NO_STACK = { captureStackTrace: false } as const

/**
 * Whether the request fiber is traced. Untraced, resolve and forward make no spans, and the
 * worker gets `passOn` as its traceparent: undefined, the caller's as received; for a new trace
 * left out by the ratio, one saying it was not sampled, so that the workers leave it out too.
 */
type RequestTrace = { readonly traced: true } | { readonly traced: false; readonly passOn: string | undefined }

const requestTrace = Context.Reference<RequestTrace>("pinboard/Tracing/RequestTrace", { defaultValue: () => ({ traced: true }) })
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
    const clock = yield* Clock.Clock

    /** The client, the exchange's namespace, id, worker, epoch and error, and the status; a 5xx marks the span failed. */
    const end = (span: Tracer.Span, facts: ExchangeFacts, answer: OwnAnswer | undefined, status: number, client: string) => {
      span.attribute("client.address", client)
      if (facts.namespace !== undefined) span.attribute("pinboard.namespace", facts.namespace)
      if (facts.id !== undefined) span.attribute("pinboard.id", facts.id)
      if (facts.worker !== undefined) span.attribute("pinboard.worker", facts.worker)
      if (facts.epoch !== undefined) span.attribute("pinboard.epoch", facts.epoch)
      if (answer !== undefined) span.attribute("pinboard.error", answer.error)
      span.attribute("http.response.status_code", status)
      span.end(clock.currentTimeNanosUnsafe(), status >= 500 ? Exit.fail(answer?.error ?? `status ${status}`) : Exit.void)
    }

    return {
      withTracer: (effect) => Effect.withTracer(effect, tracer),
      /**
       * The request's span, continued from its `traceparent`. A caller that did not sample it is
       * left untraced, and so is a new trace that the ratio leaves out.
       */
      request: (req, observer, answer) => {
        const caller = parseTraceParent(req.headers[TRACEPARENT_HEADER])
        if (caller !== undefined && !caller.sampled) return Effect.provideService(answer(observer), requestTrace, CALLER_UNSAMPLED)
        const options = caller === undefined ? SERVER : { ...SERVER, parent: Tracer.externalSpan(caller) }
        const traced = Effect.flatMap(Effect.makeSpan("instance request", options), (span) => {
          span.attribute("http.request.method", req.method ?? "GET")
          // OpenTelemetry's spelling: "1.1", or "2" for a stream of an HTTP/2 connection.
          span.attribute("network.protocol.version", req.httpVersionMajor === 2 ? "2" : req.httpVersion)
          return Effect.withParentSpan(answer(observer.withSpan({ end: (facts, own, status, client) => end(span, facts, own, status, client) })), span, NO_STACK)
        })
        if (caller !== undefined || sampleRatio === 1) return traced
        return Effect.flatMap(Random.next, (draw) =>
          draw < sampleRatio ? traced : Effect.provideService(answer(observer), requestTrace, { traced: false, passOn: unsampledTraceParent() })
        )
      },
      resolve: (resolving) =>
        Effect.flatMap(requestTrace, (trace) =>
          trace.traced
            ? Effect.useSpan("resolve", RESOLVE, (span) =>
                Effect.map(resolving, (placement) => {
                  span.attribute("pinboard.worker", placement.worker)
                  span.attribute("pinboard.epoch", placement.epoch)
                  span.attribute("pinboard.placed", placement.isNew)
                  return placement
                })
              )
            : resolving
        ),
      forward: (placement, send) =>
        Effect.flatMap(requestTrace, (trace) =>
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
