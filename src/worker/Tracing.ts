// Traces in the worker library (docs/worker.md "Traces"): with the `traces` option, every
// request and upgrade Pinboard forwards is served in a span continued from its `traceparent`,
// which names Pinboard's forward span, and exported as OTLP/HTTP JSON like Pinboard's
// (serving/Otlp.ts).
import type { IncomingMessage, ServerResponse } from "node:http"
import { Clock, Context, Effect, Exit, Option, type Scope, Tracer } from "effect"
import { EPOCH_HEADER } from "../contract/Headers.js"
import { CLIENT_CLOSED } from "../contract/StatusLine.js"
import { formatTraceParent, parseTraceParent, TRACEPARENT_HEADER } from "../contract/TraceParent.js"
import { isHttpUrl, makeOtlpTracer } from "../serving/Otlp.js"

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

/**
 * Handles one upgrade (`handle`) in its span, which ends with the status `handle` gives: 101
 * once the WebSocket is open, the refusal's status, or none when the socket closed before either.
 */
export type TraceUpgrade = (req: IncomingMessage, handle: (traceparent?: string) => Promise<number | undefined>) => Promise<void>

export interface WorkerTracing {
  readonly request: TraceRequest
  readonly upgrade: TraceUpgrade
}

/** The worker's tracing of requests and upgrades; the exporter sends what is left when the scope closes. */
export const makeWorkerTracing = (options: TracesOptions, worker: string): Effect.Effect<WorkerTracing, Error, Scope.Scope> =>
  Effect.gen(function* () {
    if (!isHttpUrl(options.endpoint)) return yield* Effect.fail(new Error(`traces.endpoint: expected an http:// or https:// URL, got ${JSON.stringify(options.endpoint)}`))
    const tracer = yield* makeOtlpTracer(options.endpoint, {
      serviceName: options.serviceName ?? "pinboard-worker",
      attributes: { "service.instance.id": worker }
    })
    const clock = yield* Clock.Clock

    /** The span for `req`, continued from its `traceparent`; undefined when the caller did not sample it. */
    const startSpan = (req: IncomingMessage, name: string): Tracer.Span | undefined => {
      const caller = parseTraceParent(req.headers[TRACEPARENT_HEADER])
      if (caller !== undefined && !caller.sampled) return undefined
      const span = tracer.span({
        name,
        parent: caller === undefined ? Option.none() : Option.some(Tracer.externalSpan(caller)),
        annotations: Context.empty(),
        links: [],
        startTime: clock.currentTimeNanosUnsafe(),
        kind: "server",
        root: caller === undefined,
        sampled: true
      })
      span.attribute("http.request.method", req.method ?? "GET")
      // The path without its query: queries may carry secrets.
      span.attribute("url.path", (req.url ?? "/").split("?", 1)[0])
      span.attribute("pinboard.worker", worker)
      const epoch = req.headers[EPOCH_HEADER]
      if (typeof epoch === "string") span.attribute("pinboard.epoch", epoch)
      return span
    }

    const end = (span: Tracer.Span, status: number | undefined) => {
      if (status !== undefined) span.attribute("http.response.status_code", status)
      span.end(clock.currentTimeNanosUnsafe(), status !== undefined && status >= 500 ? Exit.fail(`status ${status}`) : Exit.void)
    }

    const traceparentOf = (span: Tracer.Span) => formatTraceParent(span.traceId, span.spanId, true)

    return {
      request: (req, res, serve) => {
        const span = startSpan(req, "instance handler")
        if (span === undefined) return serve()
        res.once("close", () => end(span, res.headersSent ? res.statusCode : CLIENT_CLOSED))
        return serve(traceparentOf(span))
      },
      upgrade: async (req, handle) => {
        const span = startSpan(req, "instance upgrade")
        if (span === undefined) return void (await handle())
        end(span, await handle(traceparentOf(span)))
      }
    }
  })
