// W3C Trace Context's traceparent as Pinboard and the worker library read it (docs/operations.md "Traces").
import { describe, expect, it } from "vitest"
import { formatTraceParent, parseTraceParent } from "../../src/contract/TraceParent.js"

const TRACE = "0af7651916cd43dd8448eb211c80319c"
const SPAN = "b7ad6b7169203331"

describe("traceparent", () => {
  it("reads the trace id, the caller's span id and the sampled flag", () => {
    expect(parseTraceParent(`00-${TRACE}-${SPAN}-01`)).toEqual({ traceId: TRACE, spanId: SPAN, sampled: true })
    expect(parseTraceParent(`00-${TRACE}-${SPAN}-00`)).toEqual({ traceId: TRACE, spanId: SPAN, sampled: false })
    // Other flags beside sampled are ignored.
    expect(parseTraceParent(`00-${TRACE}-${SPAN}-03`)?.sampled).toBe(true)
    expect(parseTraceParent(`00-${TRACE}-${SPAN}-02`)?.sampled).toBe(false)
  })

  it("reads a later version's first four fields, whatever follows them", () => {
    expect(parseTraceParent(`01-${TRACE}-${SPAN}-01-what-comes-next`)).toEqual({ traceId: TRACE, spanId: SPAN, sampled: true })
    expect(parseTraceParent(`01-${TRACE}-${SPAN}-01`)).toEqual({ traceId: TRACE, spanId: SPAN, sampled: true })
  })

  it("refuses what the W3C format rules out", () => {
    for (const value of [
      undefined,
      "",
      `00-${TRACE}-${SPAN}`,
      `00-${TRACE}-${SPAN}-01-extra`, // version 00 has four fields
      `ff-${TRACE}-${SPAN}-01`,
      `00-${"0".repeat(32)}-${SPAN}-01`,
      `00-${TRACE}-${"0".repeat(16)}-01`,
      `00-${TRACE.toUpperCase()}-${SPAN}-01`,
      `00-${TRACE.slice(1)}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}-1`,
      ` 00-${TRACE}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}-01, 00-${TRACE}-${SPAN}-01` // two lines, joined by node:http
    ]) {
      expect(parseTraceParent(value), String(value)).toBeUndefined()
    }
    expect(parseTraceParent([`00-${TRACE}-${SPAN}-01`])).toBeUndefined()
  })

  it("writes version 00, which it reads back", () => {
    expect(formatTraceParent(TRACE, SPAN, true)).toBe(`00-${TRACE}-${SPAN}-01`)
    expect(formatTraceParent(TRACE, SPAN, false)).toBe(`00-${TRACE}-${SPAN}-00`)
    expect(parseTraceParent(formatTraceParent(TRACE, SPAN, true))).toEqual({ traceId: TRACE, spanId: SPAN, sampled: true })
  })
})
