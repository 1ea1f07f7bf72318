// The header rules of docs/proxy.md "Forwarding", pure.
import { describe, expect, it } from "vitest"
import { forwardRequestHeaders, isRefusal, peerAddress, relayResponseHeaders, relayTrailers, withCors } from "../../src/proxy/Headers.js"

const added = { epoch: "42", peer: "10.0.0.9", attestation: "signed" }

describe("request headers", () => {
  it("strips hop-by-hop headers (HTTP2-Settings among them), those named in Connection, Host, Pinboard-* and Expect", () => {
    const out = forwardRequestHeaders(
      {
        connection: "keep-alive, x-listed, X-Other",
        "keep-alive": "timeout=5",
        te: "trailers",
        trailer: "x-t",
        "transfer-encoding": "chunked",
        upgrade: "websocket",
        "http2-settings": "AAMAAABkAAQCAAAAAAIAAAAA",
        "proxy-authorization": "Basic x",
        "proxy-connection": "keep-alive",
        "x-listed": "1",
        "x-other": "2",
        host: "pinboard.example.com",
        "pinboard-caller": "token",
        "pinboard-attestation": "forged",
        "pinboard-epoch": "1",
        expect: "100-continue",
        authorization: "Bearer user",
        "content-type": "application/json",
        cookie: "a=b",
        "x-forwarded-for": "6.6.6.6"
      },
      added
    )
    expect(out).toEqual({
      authorization: "Bearer user",
      "content-type": "application/json",
      cookie: "a=b",
      "x-forwarded-for": "10.0.0.9",
      "pinboard-epoch": "42",
      "pinboard-attestation": "signed"
    })
  })

  it("Connection: keep-alive or close names nothing more; a listed name is matched trimmed and lowercased, empty entries ignored", () => {
    const kept = { "x-a": "1", "x-b": "2", accept: "*/*" }
    for (const connection of ["keep-alive", "close"]) {
      expect(forwardRequestHeaders({ connection, "keep-alive": "timeout=5", ...kept }, added)).toEqual({ ...kept, "x-forwarded-for": "10.0.0.9", "pinboard-epoch": "42", "pinboard-attestation": "signed" })
    }
    expect(forwardRequestHeaders({ connection: " X-A ,, close,", ...kept }, added)).toEqual({ "x-b": "2", accept: "*/*", "x-forwarded-for": "10.0.0.9", "pinboard-epoch": "42", "pinboard-attestation": "signed" })
    expect(relayResponseHeaders({ connection: "X-B,", ...kept }, undefined)).toEqual({ "x-a": "1", accept: "*/*", "x-accel-buffering": "no" })
  })

  it("forwards everything else unchanged, repeated values included", () => {
    const out = forwardRequestHeaders({ "x-a": "1", "x-b": ["2", "3"] as unknown as string }, added)
    expect(out["x-a"]).toBe("1")
    expect(out["x-b"]).toEqual(["2", "3"])
  })

  it("traceparent: forwarded as received untraced; replaced by Pinboard's span when traced, tracestate kept (docs/operations.md \"Traces\")", () => {
    const client = { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate: "vendor=abc" }
    expect(forwardRequestHeaders(client, added)).toMatchObject(client)
    expect(forwardRequestHeaders({}, added)).not.toHaveProperty("traceparent")
    const ours = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
    expect(forwardRequestHeaders(client, { ...added, traceparent: ours })).toMatchObject({ traceparent: ours, tracestate: "vendor=abc" })
    expect(forwardRequestHeaders({}, { ...added, traceparent: ours })).toMatchObject({ traceparent: ours })
  })
})

describe("response trailers", () => {
  it("relayed as the worker sent them, less hop-by-hop and Pinboard-* names; none: undefined", () => {
    expect(relayTrailers({})).toBeUndefined()
    expect(relayTrailers({ "pinboard-epoch": "3", connection: "close" })).toBeUndefined()
    expect(relayTrailers({ "x-checksum": "abc", "server-timing": ["db;dur=3", "app;dur=5"], "pinned-refusal": "x", "proxy-x": "1" })).toEqual({
      "x-checksum": "abc",
      "server-timing": ["db;dur=3", "app;dur=5"]
    })
  })
})

describe("response headers", () => {
  it("strips hop-by-hop, Pinboard-* and Pinned-Refusal; sets X-Accel-Buffering: no", () => {
    const out = relayResponseHeaders(
      {
        connection: "x-listed",
        "x-listed": "1",
        "keep-alive": "timeout=5",
        "transfer-encoding": "chunked",
        "pinboard-foo": "bar",
        "pinned-refusal": "lease-unhealthy",
        "set-cookie": ["a=1", "b=2"],
        "content-type": "text/plain",
        location: "/elsewhere"
      },
      undefined
    )
    expect(out).toEqual({
      "set-cookie": ["a=1", "b=2"],
      "content-type": "text/plain",
      location: "/elsewhere",
      "x-accel-buffering": "no"
    })
  })

  it("the CORS rule: with an Origin and no Access-Control-Allow-Origin, sets it and appends Vary", () => {
    expect(relayResponseHeaders({ vary: "accept" }, "https://app.example")).toMatchObject({
      "access-control-allow-origin": "https://app.example",
      vary: "accept, origin"
    })
    expect(withCors({}, "https://app.example")).toEqual({ "access-control-allow-origin": "https://app.example", vary: "origin" })
  })

  it("the CORS rule leaves a worker's own Access-Control-Allow-Origin, and requests without Origin, alone", () => {
    expect(relayResponseHeaders({ "access-control-allow-origin": "*" }, "https://app.example")).toEqual({
      "access-control-allow-origin": "*",
      "x-accel-buffering": "no"
    })
    expect(withCors({}, undefined)).toEqual({})
  })

  it("a refusal is 503 with Pinned-Refusal: lease-unhealthy, nothing else", () => {
    expect(isRefusal(503, { "pinned-refusal": "lease-unhealthy" })).toBe(true)
    expect(isRefusal(503, { "pinned-refusal": " Lease-Unhealthy " })).toBe(true)
    expect(isRefusal(503, { "pinned-refusal": "" })).toBe(false)
    expect(isRefusal(503, {})).toBe(false)
    expect(isRefusal(200, { "pinned-refusal": "lease-unhealthy" })).toBe(false)
    expect(isRefusal(503, { "pinned-refusal": "other" })).toBe(false)
  })
})

describe("the observed peer", () => {
  it("an IPv4-mapped IPv6 address is written as IPv4; others as they are; none is empty", () => {
    expect(peerAddress("::ffff:10.0.0.9")).toBe("10.0.0.9")
    expect(peerAddress("10.0.0.9")).toBe("10.0.0.9")
    expect(peerAddress("::1")).toBe("::1")
    expect(peerAddress("::ffff:a00:9")).toBe("::ffff:a00:9")
    expect(peerAddress("2001:db8::ffff:10.0.0.9")).toBe("2001:db8::ffff:10.0.0.9")
    expect(peerAddress(undefined)).toBe("")
  })
})
