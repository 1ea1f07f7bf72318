// The OTLP/HTTP JSON exporter of traces, shared by Pinboard (observe/Tracing.ts) and the worker
// library (worker/Tracing.ts): Effect's OtlpTracer over fetch. It batches spans (every 5 s, or
// at 1,000) and sends what is left when its scope closes. Imports no Pinboard service.
import { Effect, Layer, type Scope, type Tracer } from "effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as OtlpExporter from "effect/observability/OtlpExporter"
import * as OtlpSerialization from "effect/observability/OtlpSerialization"
import * as OtlpTracer from "effect/observability/OtlpTracer"

/** An http:// or https:// URL: what OTLP/HTTP can send to (and the config's check of such URLs). */
export const isHttpUrl = (s: string): boolean => {
  try {
    const { protocol } = new URL(s)
    return protocol === "http:" || protocol === "https:"
  } catch {
    return false
  }
}

/** Spans go to `<endpoint>/v1/traces`, as OTLP/HTTP's base-URL convention has it. */
export const tracesUrl = (endpoint: string): string => `${endpoint.replace(/\/+$/, "")}/v1/traces`

export interface OtlpResource {
  readonly serviceName: string
  readonly attributes?: Record<string, unknown>
}

/** OTLP's span status codes (opentelemetry-proto trace.proto). */
const STATUS_UNSET = 0
const STATUS_OK = 1

/**
 * OTLP/HTTP JSON, with a span that ended without an error marked `OK` (docs/operations.md
 * "Traces"): Effect's exporter leaves it `Unset`, and Pinboard's spans have always said `OK`.
 */
const jsonWithOkSpans = Layer.effect(
  OtlpSerialization.OtlpSerialization,
  Effect.gen(function* () {
    const json = yield* OtlpSerialization.OtlpSerialization
    const markOk = (data: OtlpTracer.TraceData): OtlpTracer.TraceData => ({
      resourceSpans: data.resourceSpans.map((resourceSpan) => ({
        ...resourceSpan,
        scopeSpans: resourceSpan.scopeSpans.map((scopeSpan) => ({
          ...scopeSpan,
          spans: scopeSpan.spans.map((span) => (span.status.code === STATUS_UNSET ? { ...span, status: { ...span.status, code: STATUS_OK } } : span))
        }))
      }))
    })
    return { ...json, traces: (data: OtlpTracer.TraceData) => json.traces(markOk(data)) }
  })
).pipe(Layer.provide(OtlpSerialization.layerJson))

export const makeOtlpTracer = (endpoint: string, resource: OtlpResource): Effect.Effect<Tracer.Tracer, never, Scope.Scope> =>
  OtlpTracer.make({ url: tracesUrl(endpoint), resource }).pipe(
    // The exporter registers with a Flusher (nobody here flushes on demand: the scope's close sends the rest).
    Effect.provide(Layer.mergeAll(FetchHttpClient.layer, jsonWithOkSpans, OtlpExporter.layerFlusher))
  )
