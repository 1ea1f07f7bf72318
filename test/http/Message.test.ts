// The rules RFC 9112 puts on every request before it is routed (docs/proxy.md "What every
// client gets"): one Host line, one on every HTTP/1.1 request (3.2), and no transfer coding
// but chunked (6.1). Catalogue rows as docs/errors.md spells them.
import { describe, expect, it } from "vitest"
import { messageError } from "../../src/http/Message.js"

const head = (version: "1.0" | "1.1", raw: ReadonlyArray<[string, string]>) => {
  const headers: Record<string, string> = {}
  for (const [name, value] of raw) headers[name.toLowerCase()] ??= value
  const [major, minor] = version.split(".").map(Number) as [number, number]
  return { httpVersionMajor: major, httpVersionMinor: minor, rawHeaders: raw.flat(), headers }
}

const answer = (version: "1.0" | "1.1", raw: ReadonlyArray<[string, string]>) => {
  const error = messageError(head(version, raw))
  return error === undefined ? undefined : { tag: error._tag, status: error.reply.status, body: error.reply.body }
}

describe("the HTTP message", () => {
  it("one Host line: nothing to say, in either version", () => {
    expect(answer("1.1", [["Host", "a.example"]])).toBeUndefined()
    expect(answer("1.0", [["host", "a.example"]])).toBeUndefined()
    // An empty Host is what RFC 9112 asks of a client whose target has no authority.
    expect(answer("1.1", [["HOST", ""]])).toBeUndefined()
  })

  it("HTTP/1.1 without Host: 400 missing Host header; HTTP/1.0 may omit it", () => {
    expect(answer("1.1", [["Accept", "*/*"]])).toEqual({ tag: "MissingHost", status: 400, body: '{"error":"missing Host header"}' })
    expect(answer("1.0", [["Accept", "*/*"]])).toBeUndefined()
  })

  it("two Host lines, however spelled and even when equal: 400 more than one Host header", () => {
    const repeated = { tag: "RepeatedHost", status: 400, body: '{"error":"more than one Host header"}' }
    expect(answer("1.1", [["Host", "a.example"], ["Host", "b.example"]])).toEqual(repeated)
    expect(answer("1.1", [["host", "a.example"], ["X-Other", "1"], ["hOsT", "a.example"]])).toEqual(repeated)
    expect(answer("1.0", [["Host", "a.example"], ["Host", "a.example"]])).toEqual(repeated)
  })

  it("Transfer-Encoding: chunked alone passes; any other coding is 501", () => {
    expect(answer("1.1", [["Host", "a"], ["Transfer-Encoding", "chunked"]])).toBeUndefined()
    expect(answer("1.1", [["Host", "a"], ["Transfer-Encoding", " Chunked "]])).toBeUndefined()
    const notImplemented = { tag: "TransferCodingNotImplemented", status: 501, body: '{"error":"transfer coding not implemented"}' }
    expect(answer("1.1", [["Host", "a"], ["Transfer-Encoding", "gzip, chunked"]])).toEqual(notImplemented)
    expect(answer("1.1", [["Host", "a"], ["Transfer-Encoding", "identity, chunked"]])).toEqual(notImplemented)
    expect(answer("1.1", [["Host", "a"], ["Transfer-Encoding", "chunked, chunked"]])).toEqual(notImplemented)
  })

  it("Host comes first: a request wrong on both counts is told about Host", () => {
    expect(answer("1.1", [["Transfer-Encoding", "gzip, chunked"]])?.tag).toBe("MissingHost")
  })
})
