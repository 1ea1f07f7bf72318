// W3C Trace Context's `traceparent` header (https://www.w3.org/TR/trace-context/), as Pinboard
// and the worker library read and write it (docs/operations.md "Traces"). Imports nothing.

export const TRACEPARENT_HEADER = "traceparent"

export interface TraceParent {
  /** 32 lowercase hex digits, not all zeros. */
  readonly traceId: string
  /** The caller's span: 16 lowercase hex digits, not all zeros. */
  readonly spanId: string
  /** The caller recorded its span (flag 01) and asks that the trace be recorded. */
  readonly sampled: boolean
}

// version-traceId-spanId-flags; a later version may append fields after another `-`.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/
const ZEROS = /^0+$/

/**
 * The caller's trace context, or undefined when there is none or it is malformed (a request
 * with two `traceparent` lines arrives as one value joined by `, `, which is malformed too).
 */
export const parseTraceParent = (value: string | ReadonlyArray<string> | undefined): TraceParent | undefined => {
  if (typeof value !== "string") return undefined
  const match = TRACEPARENT.exec(value)
  if (match === null) return undefined
  const [, version, traceId, spanId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined]
  // Version ff is forbidden; version 00 has exactly four fields.
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined
  if (ZEROS.test(traceId) || ZEROS.test(spanId)) return undefined
  return { traceId, spanId, sampled: (parseInt(flags, 16) & 1) === 1 }
}

/** The `traceparent` (version 00) that names `spanId` of `traceId` as the receiver's parent. */
export const formatTraceParent = (traceId: string, spanId: string, sampled: boolean): string =>
  `00-${traceId}-${spanId}-${sampled ? "01" : "00"}`
