// Traces in the worker library (docs/worker.md "Traces"): with the `traces` option, every
// request Pinboard forwards is served in a span continued from its `traceparent`, which names
// Pinboard's forward span, and exported as OTLP/HTTP JSON like Pinboard's (serving/Otlp.ts).
import type { IncomingMessage, ServerResponse } from "node:http"
import { Context, Effect, Exit, Option, type Scope, Tracer } from "effect"
import { EPOCH_HEADER } from "../contract/Headers.js"
import { CLIENT_CLOSED } from "../contract/StatusLine.js"
import { formatTraceParent, parseTraceParent, TRACEPARENT_HEADER } from "../contract/TraceParent.js"
import { isOtlpEndpoint, makeOtlpTracer } from "../serving/Otlp.js"

export interface TracesOptions {
  /** The OTLP/HTTP collector's base URL (`http://collector:4318`): spans go to `<endpoint>/v1/traces`. */
  readonly endpoint: string
  /** The resource's `service.name`; default `pinboard-worker`. */
  readonly serviceName?: string
}

/**
 * Serves one request (`serve`) in its span, which ends when `res` closes; `serve` gets the
 * `traceparent` naming that span (none when the caller did not sample the request).
 */
export type TraceRequest = (req: IncomingMessage, res: ServerResponse, serve: (traceparent?: string) => Promise<void>) => Promise<void>

/** The worker's request tracing; the exporter sends what is left when the scope closes. */
export const makeTraceRequest = (options: TracesOptions, worker: string): Effect.Effect<TraceRequest, Error, Scope.Scope> =>
  Effect.gen(function* () {
    if (!isOtlpEndpoint(options.endpoint)) return yield* Effect.fail(new Error(`traces.endpoint: expected an http:// or https:// URL, got ${JSON.stringify(options.endpoint)}`))
    const tracer = yield* makeOtlpTracer(options.endpoint, {
      serviceName: options.serviceName ?? "pinboard-worker",
      attributes: { "service.instance.id": worker }
    })
    const clock = yield* Effect.clock
    return (req, res, serve) => {
      const caller = parseTraceParent(req.headers[TRACEPARENT_HEADER])
      // The caller did not sample this request: no span.
      if (caller !== undefined && !caller.sampled) return serve()
      const parent = caller === undefined ? Option.none() : Option.some(Tracer.externalSpan(caller))
      const span = tracer.span("instance handler", parent, Context.empty(), [], clock.unsafeCurrentTimeNanos(), "server")
      span.attribute("http.request.method", req.method ?? "GET")
      // The path without its query: queries may carry secrets.
      span.attribute("url.path", (req.url ?? "/").split("?", 1)[0])
      span.attribute("pinboard.worker", worker)
      const epoch = req.headers[EPOCH_HEADER]
      if (typeof epoch === "string") span.attribute("pinboard.epoch", epoch)
      res.once("close", () => {
        const status = res.headersSent ? res.statusCode : CLIENT_CLOSED
        span.attribute("http.response.status_code", status)
        span.end(clock.unsafeCurrentTimeNanos(), status >= 500 ? Exit.fail(`status ${status}`) : Exit.void)
      })
      return serve(formatTraceParent(span.traceId, span.spanId, true))
    }
  })
