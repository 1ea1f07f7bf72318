// The reason a 502 gives in the access log (docs/operations.md), from what the connection and
// undici report; the errors are the ones undici 7 and node:net raise for each case.
import { describe, expect, it } from "vitest"
import { connectFailureReason, headersFailureReason } from "../../src/proxy/GatewayFailure.js"

const coded = (code: string, message = code) => Object.assign(new Error(message), { code })

describe("why a 502", () => {
  it("before anything was sent: connect refused, connect timeout, or connect failed with the code", () => {
    expect(connectFailureReason(coded("ECONNREFUSED"), false)).toBe("connect refused")
    expect(connectFailureReason(undefined, true)).toBe("connect timeout")
    expect(connectFailureReason(coded("EHOSTUNREACH"), false)).toBe("connect failed (EHOSTUNREACH)")
    expect(connectFailureReason("something else", false)).toBe("connect failed")
  })

  it("connected, no usable head: header overflow, parse error, reset before headers", () => {
    expect(headersFailureReason(coded("UND_ERR_HEADERS_OVERFLOW", "Headers Overflow Error"))).toBe("header overflow")
    const parser = Object.assign(new Error("Response does not match the HTTP/1.1 protocol (Invalid header token)"), { name: "HTTPParserError" })
    expect(headersFailureReason(parser)).toBe("parse error")
    expect(headersFailureReason(coded("HPE_INVALID_CONSTANT"))).toBe("parse error")
    expect(headersFailureReason(coded("UND_ERR_SOCKET", "other side closed"))).toBe("reset before headers")
    expect(headersFailureReason(coded("ECONNRESET"))).toBe("reset before headers")
    expect(headersFailureReason(coded("EPIPE"))).toBe("reset before headers")
    expect(headersFailureReason(coded("UND_ERR_SOMETHING"))).toBe("failed before headers (UND_ERR_SOMETHING)")
    expect(headersFailureReason(undefined)).toBe("failed before headers")
  })
})
