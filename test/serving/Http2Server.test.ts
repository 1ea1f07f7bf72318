// The HTTP/2 connections of the data plane (src/serving/Http2Server.ts, Http2Handoff.ts,
// src/http/Http2Request.ts), in process with node:http2's own client: the preface and ALPN
// hand-off, each stream as the HTTP/1.1 request it maps to, the idle timeout, the reset bound
// and GOAWAY on drain.
import http, { type IncomingMessage, type ServerResponse } from "node:http"
import http2, { type ClientHttp2Session } from "node:http2"
import type { AddressInfo } from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { asHttp1Exchange } from "../../src/http/Http2Request.js"
import { handOffByPreface, prefaceOf } from "../../src/serving/Http2Handoff.js"
import { makeHttp2Connections, ResetBudget, type Http2Limits } from "../../src/serving/Http2Server.js"
import { messageError } from "../../src/http/Message.js"
import { h2Request, type H2RequestOptions } from "../support/Http2Client.js"
import { poll } from "../support/Time.js"

const PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

describe("the HTTP/2 preface", () => {
  it("is told from an HTTP/1.1 request line as soon as a byte differs", () => {
    expect(prefaceOf(Buffer.from(PREFACE))).toBe("h2")
    expect(prefaceOf(Buffer.from(`${PREFACE}\x00\x00\x00\x04`))).toBe("h2")
    expect(prefaceOf(Buffer.from("PRI * HTTP/2"))).toBe("more")
    expect(prefaceOf(Buffer.from("P"))).toBe("more")
    expect(prefaceOf(Buffer.from("POST / HTTP/1.1\r\n"))).toBe("h1")
    expect(prefaceOf(Buffer.from("GET / HTTP/1.1\r\n"))).toBe("h1")
    expect(prefaceOf(Buffer.from("PRI * HTTP/1.1\r\n\r\n"))).toBe("h1")
  })
})

describe("the reset budget", () => {
  it("allows the burst at once, then the rate per second", () => {
    const budget = new ResetBudget(3, 2, 0)
    expect([budget.spend(0), budget.spend(0), budget.spend(0)]).toStrictEqual([true, true, true])
    expect(budget.spend(0)).toBe(false)
    const refilled = new ResetBudget(3, 2, 0)
    for (let i = 0; i < 3; i++) refilled.spend(0)
    // Half a second at 2 per second: one more.
    expect(refilled.spend(500)).toBe(true)
    expect(refilled.spend(500)).toBe(false)
  })

  it("refills no further than the burst", () => {
    const budget = new ResetBudget(2, 100, 0)
    expect([budget.spend(60_000), budget.spend(60_000), budget.spend(60_000)]).toStrictEqual([true, true, false])
  })
})

// ---- in process: a plain listener with h2c, the handler echoing what it was given ----------------

interface Seen {
  readonly method: string | undefined
  readonly url: string | undefined
  readonly httpVersion: string
  readonly headers: Record<string, unknown>
  readonly rawHeaders: Array<string>
  readonly refused: string | null
  readonly body: string
}

const LIMITS: Http2Limits = { maxConcurrentStreams: 100, maxHeaderListSize: 16_384, streamResetBurst: 100, streamResetRate: 33, idleTimeoutMs: 60_000 }

const open: Array<{ close: () => void }> = []
afterEach(() => {
  for (const each of open.splice(0)) each.close()
})

/** A plain listener that hands h2c connections over; every request (either protocol) echoed as Seen, `/hold` left open. */
const listener = async (limits: Partial<Http2Limits> = {}, draining = () => false) => {
  const floods: Array<string | undefined> = []
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    if (req.url === "/hold") return res.writeHead(200).write("held")
    if (req.url === "/silent") return
    if (req.url === "/brief") {
      res.writeHead(200).write("begun")
      setTimeout(() => res.end(" and done"), 200)
      return
    }
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const refused = messageError(req)?._tag ?? null
      const seen: Seen = {
        method: req.method,
        url: req.url,
        httpVersion: req.httpVersion,
        headers: { ...req.headers },
        rawHeaders: [...req.rawHeaders],
        refused,
        body: Buffer.concat(chunks).toString()
      }
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify(seen))
    })
  }
  const connections = makeHttp2Connections(
    { ...LIMITS, ...limits },
    (stream, answer) => {
      const { req, res } = asHttp1Exchange(stream, answer)
      handle(req, res)
    },
    (_stream, answer) => answer.writeHead(501).end(),
    { draining, resetFlood: (peer) => floods.push(peer) }
  )
  const server = http.createServer(handle)
  handOffByPreface(server, connections.accept, { timeoutMs: 5000 })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  open.push({
    close: () => {
      connections.destroyAll()
      server.closeAllConnections()
      server.close()
    }
  })
  return { port, connections, floods }
}

const connect = (port: number): ClientHttp2Session => {
  const session = http2.connect(`http://127.0.0.1:${port}`)
  session.on("error", () => undefined)
  open.push({ close: () => session.destroy() })
  return session
}

const ask = async (session: ClientHttp2Session, path: string, options: H2RequestOptions = {}): Promise<{ status: number; seen: Seen }> => {
  const answer = await h2Request(session, path, options)
  return { status: answer.status, seen: JSON.parse(answer.text) as Seen }
}

describe("a stream as the HTTP/1.1 request it maps to", () => {
  it(":authority is the Host, the pseudo-header fields leave both header lists, the method and path stay", async () => {
    const { port } = await listener()
    const { status, seen } = await ask(connect(port), "/threads/t1/echo?x=1", { headers: { "x-one": "1" } })
    expect(status).toBe(200)
    expect(seen).toMatchObject({ method: "GET", url: "/threads/t1/echo?x=1", httpVersion: "2.0", refused: null })
    expect(seen.headers.host).toBe(`127.0.0.1:${port}`)
    expect(seen.rawHeaders.filter((_, i) => i % 2 === 0)).toStrictEqual(["x-one", "host"])
    expect(Object.keys(seen.headers).filter((name) => name.startsWith(":"))).toStrictEqual([])
    expect(seen.headers["transfer-encoding"]).toBeUndefined()
  })

  it("a body without a length is chunked; with one, as sent", async () => {
    const { port } = await listener()
    const session = connect(port)
    const chunked = await ask(session, "/p", { method: "POST", body: "hello" })
    expect(chunked.seen.headers["transfer-encoding"]).toBe("chunked")
    expect(chunked.seen.body).toBe("hello")
    const sized = await ask(session, "/p", { method: "POST", body: "hello", headers: { "content-length": "5" } })
    expect(sized.seen.headers["transfer-encoding"]).toBeUndefined()
    expect(sized.seen.headers["content-length"]).toBe("5")
  })

  it("a Host that is not the :authority is a second Host (RFC 9113 8.3.1), refused as RFC 9112 refuses two", async () => {
    const { port } = await listener()
    const session = connect(port)
    const same = await ask(session, "/a", { headers: { ":authority": `127.0.0.1:${port}`, host: `127.0.0.1:${port}` } })
    expect(same.seen.refused).toBeNull()
    const other = await ask(session, "/a", { headers: { ":authority": `127.0.0.1:${port}`, host: "elsewhere.example" } })
    expect(other.seen.refused).toBe("RepeatedHost")
  })

  it("HTTP/1.1 on the same listener is untouched", async () => {
    const { port } = await listener()
    const answer = await fetch(`http://127.0.0.1:${port}/plain`)
    const seen = (await answer.json()) as Seen
    expect(seen.httpVersion).toBe("1.1")
    expect(seen.url).toBe("/plain")
  })
})

describe("the limits of an HTTP/2 connection", () => {
  it("advertises its SETTINGS", async () => {
    const { port } = await listener({ maxConcurrentStreams: 7, maxHeaderListSize: 8192 })
    const session = connect(port)
    const settings = await new Promise<http2.Settings>((resolve) => session.once("remoteSettings", resolve))
    expect(settings.maxConcurrentStreams).toBe(7)
    expect(settings.maxHeaderListSize).toBe(8192)
  })

  it("closes a connection with no open stream after the idle timeout, not one whose stream is open", async () => {
    const { port } = await listener({ idleTimeoutMs: 300 })
    const idle = connect(port)
    const holding = connect(port)
    const held = holding.request({ ":path": "/hold" })
    held.on("error", () => undefined)
    await new Promise((resolve) => held.once("response", resolve))
    const goaway = await new Promise<number>((resolve) => idle.once("goaway", (code: number) => resolve(code)))
    expect(goaway).toBe(http2.constants.NGHTTP2_NO_ERROR)
    expect(holding.closed || holding.destroyed).toBe(false)
  })

  it("ends a connection that cancels more streams before their answer than the budget: GOAWAY ENHANCE_YOUR_CALM", async () => {
    const { port, floods } = await listener({ streamResetBurst: 5, streamResetRate: 1 })
    const session = connect(port)
    let told: number | undefined
    const goaway = new Promise<number>((resolve) => session.once("goaway", (code: number) => resolve((told = code))))
    // Each stream's HEADERS go out, then its RST_STREAM CANCEL, before any answer; until the GOAWAY
    // (a loaded machine can run the loop slowly enough for the refill to keep up a while).
    for (let i = 0; i < 500 && told === undefined && !session.closed && !session.destroyed; i++) {
      const stream = session.request({ ":path": "/silent" })
      stream.on("error", () => undefined)
      // 'ready' (the stream's id) comes at once once the session is up.
      if (stream.pending) await new Promise((resolve) => (stream.once("ready", resolve), stream.once("close", resolve)))
      stream.close(http2.constants.NGHTTP2_CANCEL)
      await new Promise((resolve) => setImmediate(resolve))
    }
    expect(await goaway).toBe(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM)
    expect(floods).toHaveLength(1)
  })

  it("streams answered before the client ends them cost nothing of the budget", async () => {
    const { port, floods } = await listener({ streamResetBurst: 2, streamResetRate: 1 })
    const session = connect(port)
    for (let i = 0; i < 10; i++) expect((await ask(session, `/n${i}`)).status).toBe(200)
    expect(floods).toStrictEqual([])
    expect(session.closed).toBe(false)
  })

  it("on drain: GOAWAY, the open stream finishes, a stream opened meanwhile tells its connection to go, and the connections close", async () => {
    let draining = false
    const { port, connections } = await listener({}, () => draining)
    const session = connect(port)
    const brief = session.request({ ":path": "/brief" })
    const body: Array<Buffer> = []
    brief.on("data", (chunk: Buffer) => body.push(chunk))
    const finished = new Promise((resolve) => brief.once("end", resolve))
    await new Promise((resolve) => brief.once("response", resolve))
    const goaway = new Promise<number>((resolve) => session.once("goaway", (code: number) => resolve(code)))
    draining = true
    connections.closeAll()
    expect(await goaway).toBe(http2.constants.NGHTTP2_NO_ERROR)
    await finished
    expect(Buffer.concat(body).toString()).toBe("begun and done")
    await poll(() => session.closed || session.destroyed, { timeoutMs: 5000, reason: "the drained connection to close" })
    // A connection made while draining: its first stream is answered, and GOAWAY follows it.
    const late = connect(port)
    const lateGoaway = new Promise<number>((resolve) => late.once("goaway", (code: number) => resolve(code)))
    expect((await ask(late, "/late")).status).toBe(200)
    expect(await lateGoaway).toBe(http2.constants.NGHTTP2_NO_ERROR)
  })
})
