// HTTP/2 to clients, end to end (docs/deploy.md "HTTP/2"): the built Pinboard with PINBOARD_H2C=1
// (and over TLS by ALPN), node:http2's client, the fixture workers. Every rule holds per stream
// as per HTTP/1.1 request: the same answers from the catalogue and from workers, the worker sees
// the request an HTTP/1.1 client would have sent, bodies stream both ways, 100-continue,
// trailers, the access log, metrics, traces, the inflight cap, CONNECT refused, `:authority` as
// the hostname in hostname-aware mode. Real clients (curl, h2load, Go, Chromium) and raw frames
// are in Http2Clients.test.ts.
import { createHash, randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import http2, { type ClientHttp2Session } from "node:http2"
import net from "node:net"
import tls from "node:tls"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Echo } from "../support/Echo.js"
import { Fleet, TOKEN, uid, waitForColdStart, type Pinboard } from "../support/Fleet.js"
import { h2Connect, h2Request, type H2Answer } from "../support/Http2Client.js"
import { OtlpReceiver } from "../support/OtlpReceiver.js"
import { freePort } from "../support/Processes.js"
import { eventually, scaled } from "../support/Time.js"
import { makeTestCa, type TestCa } from "../support/TestCa.js"
import { request } from "../support/Wire.js"

const NS = "/threads"


const fleet = new Fleet()
let receiver: OtlpReceiver
let ca: TestCa
let pinboard: Pinboard
let capped: Pinboard
let hostnames: Pinboard
let secure: Pinboard
let metricsPort: number
let session: ClientHttp2Session

const h2 = (path: string, options: Parameters<typeof h2Request>[2] = {}) => h2Request(session, path, options)
const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex")

beforeAll(async () => {
  receiver = await OtlpReceiver.start()
  ca = makeTestCa(["a"])
  metricsPort = await freePort()
  const h2c = { PINBOARD_H2C: "1" }
  ;[pinboard, capped, hostnames, secure] = await Promise.all([
    fleet.pinboard({ env: { ...h2c, PINBOARD_ACCESS_LOG: "1", PINBOARD_METRICS_PORT: String(metricsPort), PINBOARD_OTLP_ENDPOINT: receiver.url } }),
    fleet.pinboard({ env: h2c, config: { forwards: { maxInflight: 1 } } }),
    fleet.pinboard({ env: h2c, config: { hostnameAware: true } }),
    fleet.pinboard({ registryPort: true, env: { PINBOARD_TLS_CERT: ca.file("a.pem"), PINBOARD_TLS_KEY: ca.file("a.key") } })
  ])
  const at = (hostname: string) => ({ namespace: NS, hostname, env: "prod" })
  await Promise.all([
    fleet.worker(pinboard, { id: uid("w1"), namespaces: [NS] }),
    fleet.worker(pinboard, { id: uid("w2"), namespaces: [NS] }),
    fleet.worker(capped, { id: uid("cap"), namespaces: [NS] }),
    fleet.worker(hostnames, { id: "wa", namespaces: [], registrations: [at("a.example")], epoch: "1" }),
    fleet.worker(hostnames, { id: "wb", namespaces: [], registrations: [at("b.example")], epoch: "1" }),
    fleet.worker(secure, { id: uid("tls"), namespaces: [NS] })
  ])
  session = await h2Connect(pinboard.url)
  const over = (target: Pinboard, authority?: string) => async (path: string) => {
    const connection = await h2Connect(target.url)
    try {
      return await h2Request(connection, path, authority === undefined ? {} : { headers: { ":authority": authority } })
    } finally {
      connection.close()
    }
  }
  await Promise.all([
    waitForColdStart(pinboard, NS),
    waitForColdStart(capped, NS),
    waitForColdStart(hostnames, NS, "a.example:8080", over(hostnames, "a.example:8080")),
    waitForColdStart(hostnames, NS, "b.example:8080", over(hostnames, "b.example:8080")),
    waitForColdStart(secure, NS, undefined, async (path) => {
      const connection = await h2Connect(`https://localhost:${secure.port}`, { ca: [readFileSync(ca.file("ca.pem"))] })
      try {
        return await h2Request(connection, path)
      } finally {
        connection.close()
      }
    })
  ])
}, scaled(90_000))

afterAll(async () => {
  session?.close()
  await fleet.stop()
  await receiver?.stop()
  ca?.remove()
})

/** What a client can compare of two answers: Pinboard's own are byte for byte the same. */
const comparable = (answer: { readonly status: number; readonly text: string; readonly headers: Record<string, unknown> }) => ({
  status: answer.status,
  contentType: answer.headers["content-type"],
  retryAfter: answer.headers["retry-after"] !== undefined,
  allowOrigin: answer.headers["access-control-allow-origin"],
  text: answer.text.startsWith("{\"worker\"") ? "(an echo)" : answer.text
})

describe("every answer per stream as per HTTP/1.1 request", () => {
  const id = uid("t")
  const cases: ReadonlyArray<{ readonly name: string; readonly method?: string; readonly path: string; readonly headers?: Record<string, string> }> = [
    { name: "a probe", path: "/healthz" },
    { name: "a probe with the wrong method", method: "POST", path: "/healthz" },
    { name: "readiness", path: "/readyz" },
    { name: "the registry without the token", path: "/registry/workers" },
    { name: "an unknown registry route", path: "/registry/nowhere", headers: { authorization: `Bearer ${TOKEN}` } },
    { name: "an unknown namespace", path: `/nowhere/${id}/echo` },
    { name: "no id", path: `${NS}/` },
    { name: "an id too long", path: `${NS}/${"x".repeat(300)}/echo` },
    { name: "a worker's answer", path: `${NS}/${id}/echo` },
    { name: "a worker's status", method: "PUT", path: `${NS}/${id}/status/418` },
    { name: "a worker's 502", path: `${NS}/${id}/status/502` },
    { name: "HEAD", method: "HEAD", path: `${NS}/${id}/echo` },
    { name: "CORS on Pinboard's own answer", path: `/nowhere/${id}/echo`, headers: { origin: "https://app.example" } },
    { name: "CORS on a worker's answer", path: `${NS}/${id}/echo`, headers: { origin: "https://app.example" } }
  ]
  for (const c of cases) {
    it(c.name, async () => {
      const one = await request(pinboard, c.path, { method: c.method ?? "GET", headers: c.headers ?? {} })
      const two = await h2(c.path, { method: c.method ?? "GET", headers: c.headers ?? {} })
      expect(comparable(two as H2Answer & { headers: Record<string, unknown> })).toStrictEqual(comparable(one))
    })
  }

  it("the worker receives the request an HTTP/1.1 client would have sent: HTTP/1.1, no pseudo-header, the same fields", async () => {
    const headers = { "x-custom": "one", accept: "application/json", cookie: "a=1" }
    const path = `${NS}/${id}/echo?q=1`
    const one = JSON.parse((await request(pinboard, path, { headers })).text) as Echo
    const two = JSON.parse((await h2(path, { headers })).text) as Echo
    expect(two.worker).toBe(one.worker)
    expect(two.url).toBe(one.url)
    expect(two.method).toBe("GET")
    const names = (echo: Echo) => echo.rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase()).sort()
    expect(names(two)).toStrictEqual(names(one))
    expect(names(two).some((name) => name.startsWith(":"))).toBe(false)
    expect(two.headers["pinboard-epoch"]).toBe(one.headers["pinboard-epoch"])
  })

  it("the worker's connection-specific fields do not reach an HTTP/2 client (RFC 9113 8.2.2)", async () => {
    const fields = ["Keep-Alive:timeout=5", "Connection:x-drop", "X-Drop:1", "Proxy-Connection:keep-alive", "X-Kept:yes"]
    const answer = await h2(`${NS}/${id}/headers?${fields.map((field) => `h=${encodeURIComponent(field)}`).join("&")}`)
    expect(answer.status).toBe(200)
    expect(answer.headers["x-kept"]).toBe("yes")
    for (const name of ["keep-alive", "connection", "x-drop", "proxy-connection"]) expect(answer.headers[name]).toBeUndefined()
  })

  it("a request whose Host differs from its :authority: 400, as two Hosts", async () => {
    const answer = await h2(`${NS}/${id}/echo`, { headers: { ":authority": `127.0.0.1:${pinboard.port}`, host: "elsewhere.example" } })
    const twoHosts = await request(pinboard, `${NS}/${id}/echo`, { headers: [["Host", "a.example"], ["Host", "b.example"]] as unknown as Record<string, string> })
    expect(comparable(answer as H2Answer & { headers: Record<string, unknown> })).toStrictEqual(comparable(twoHosts))
  })

  it("CONNECT is refused: 501 from the catalogue", async () => {
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const stream = session.request({ ":method": "CONNECT", ":authority": "example.com:443" })
      let status = 0
      const chunks: Array<Buffer> = []
      stream.on("response", (headers) => (status = Number(headers[":status"])))
      stream.on("data", (chunk: Buffer) => chunks.push(chunk))
      stream.on("end", () => resolve({ status, text: Buffer.concat(chunks).toString() }))
      stream.on("error", reject)
    })
    expect(answer.status).toBe(501)
    expect(JSON.parse(answer.text)).toHaveProperty("error")
  })
})

describe("bodies, both ways, per stream", () => {
  it("an upload without a length reaches the worker whole, chunked; one with a length, as sized", async () => {
    const body = randomBytes(3 * 1024 * 1024 + 17)
    const chunked = JSON.parse((await h2(`${NS}/${uid("up")}/upload`, { method: "POST", body })).text) as Echo
    expect(chunked.bodyBytes).toBe(body.length)
    expect(chunked.bodySha256).toBe(sha256(body))
    expect(chunked.headers["transfer-encoding"]).toBe("chunked")
    const sized = JSON.parse((await h2(`${NS}/${uid("up")}/upload`, { method: "POST", body, headers: { "content-length": String(body.length) } })).text) as Echo
    expect(sized.bodySha256).toBe(sha256(body))
    expect(sized.headers["content-length"]).toBe(String(body.length))
  })

  it("a download read slowly arrives whole: the worker is held back by flow control, not buffered without end", async () => {
    const bytes = 4 * 1024 * 1024
    const stream = session.request({ ":path": `${NS}/${uid("down")}/download?bytes=${bytes}` })
    stream.pause()
    await new Promise((resolve) => stream.once("response", resolve))
    // Paused: the stream's window (64 KiB) fills and stays full.
    await new Promise((resolve) => setTimeout(resolve, 500))
    const chunks: Array<Buffer> = []
    stream.on("data", (chunk: Buffer) => chunks.push(chunk))
    stream.resume()
    await new Promise((resolve) => stream.once("end", resolve))
    const received = Buffer.concat(chunks)
    expect(received.length).toBe(bytes)
    expect(received.every((byte, i) => byte === i % 251)).toBe(true)
  })

  it("Expect: 100-continue: 100 first, then the body goes; the worker gets no Expect", async () => {
    const stream = session.request({ ":method": "POST", ":path": `${NS}/${uid("cont")}/echo`, expect: "100-continue", "content-length": "5" }, { endStream: false })
    await new Promise((resolve) => stream.once("continue", resolve))
    stream.end("hello")
    const chunks: Array<Buffer> = []
    stream.on("data", (chunk: Buffer) => chunks.push(chunk))
    await new Promise((resolve) => stream.once("end", resolve))
    const echo = JSON.parse(Buffer.concat(chunks).toString()) as Echo
    expect(echo.bodyBytes).toBe(5)
    expect(echo.headers.expect).toBeUndefined()
  })

  it("the worker's trailers reach the client as HTTP/2 trailers", async () => {
    const answer = await h2(`${NS}/${uid("tr")}/trailers`)
    expect(answer.text).toBe("part one, part two")
    expect(answer.trailers?.["x-checksum"]).toBe("abc123")
    expect(answer.headers["transfer-encoding"]).toBeUndefined()
  })

  it("a streamed answer arrives as the worker writes it, not at its end", async () => {
    // The worker writes a line at 0, 500 and 1000 ms: the first is read long before the end.
    const stream = session.request({ ":path": `${NS}/${uid("st")}/stream?chunks=3&everyMs=500` })
    const firstAt = await new Promise<number>((resolve) => stream.once("data", () => resolve(performance.now())))
    stream.resume()
    await new Promise((resolve) => stream.once("end", resolve))
    expect(performance.now() - firstAt).toBeGreaterThan(500)
  })
})

describe("many streams on one connection", () => {
  it("each id is served by its owner, as over HTTP/1.1, all at once", async () => {
    const ids = Array.from({ length: 40 }, () => uid("many"))
    const owners = await Promise.all(ids.map(async (id) => (JSON.parse((await h2(`${NS}/${id}/echo`)).text) as Echo).worker))
    for (const [i, id] of ids.entries()) {
      const again = JSON.parse((await request(pinboard, `${NS}/${id}/echo`)).text) as Echo
      expect(again.worker).toBe(owners[i])
    }
  })

  it("the inflight cap counts streams: past forwards.maxInflight, 503 worker at capacity", async () => {
    const connection = await h2Connect(capped.url)
    try {
      const id = uid("slow")
      const slow = h2Request(connection, `${NS}/${id}/slow-headers?ms=${scaled(1500)}`)
      await new Promise((resolve) => setTimeout(resolve, 300))
      const second = await h2Request(connection, `${NS}/${id}/echo`)
      expect(second.status).toBe(503)
      expect(JSON.parse(second.text)).toStrictEqual({ error: "worker at capacity, retry" })
      expect((await slow).status).toBe(200)
    } finally {
      connection.close()
    }
  })
})

describe("observed per stream", () => {
  it("an access line, a count in pinboard_requests_total and a server span for each", async () => {
    const scrape = async () => {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
      return [...text.matchAll(/^pinboard_requests_total\{[^}]*\} (\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0)
    }
    const before = await scrape()
    const id = uid("seen")
    const traceId = randomBytes(16).toString("hex")
    const answer = await h2(`${NS}/${id}/echo`, { headers: { traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01` } })
    expect(answer.status).toBe(200)
    await eventually(async () => expect(await scrape()).toBe(before + 1))
    await eventually(() => {
      const line = pinboard.process.lines.find((text) => text.includes('"message":"access"') && text.includes(`/${id}/`))
      expect(line).toBeDefined()
      expect(JSON.parse(line!)).toMatchObject({ method: "GET", path: `${NS}/${id}/echo`, status: 200, id })
    })
    await eventually(() => {
      const spans = receiver.spans().filter((span) => span.traceId === traceId && span.service === "pinboard" && span.kind === 2)
      expect(spans).toHaveLength(1)
      expect(spans[0]!.attributes["http.request.method"]).toBe("GET")
      expect(spans[0]!.attributes["network.protocol.version"]).toBe("2")
    }, 10_000)
  })
})

describe("hostname-aware mode", () => {
  it(":authority is the hostname: each hostname's ids go to its own worker", async () => {
    const connection = await h2Connect(hostnames.url)
    try {
      for (const [hostname, worker] of [["a.example", "wa"], ["b.example", "wb"]] as const) {
        const answer = await h2Request(connection, `${NS}/${uid("h")}/echo`, { headers: { ":authority": `${hostname}:8080` } })
        expect(answer.status, answer.text).toBe(200)
        expect((JSON.parse(answer.text) as Echo).worker).toBe(worker)
      }
    } finally {
      connection.close()
    }
  })
})

describe("over TLS", () => {
  it("ALPN h2: the worker's answer; a client that offers only http/1.1 gets HTTP/1.1", async () => {
    const connection = await h2Connect(`https://localhost:${secure.port}`, { ca: [readFileSync(ca.file("ca.pem"))] })
    try {
      expect(connection.alpnProtocol).toBe("h2")
      const answer = await h2Request(connection, `${NS}/${uid("tls")}/echo`)
      expect(answer.status).toBe(200)
    } finally {
      connection.close()
    }
    const protocol = await new Promise<string | false>((resolve, reject) => {
      const socket = tls.connect({ host: "127.0.0.1", port: secure.port, servername: "localhost", ca: readFileSync(ca.file("ca.pem")), ALPNProtocols: ["http/1.1"] }, () => {
        resolve(socket.alpnProtocol ?? false)
        socket.end()
      })
      socket.on("error", reject)
    })
    expect(protocol).toBe("http/1.1")
  })
})

describe("the limits, from their settings", () => {
  let limited: Pinboard
  let idling: Pinboard
  // Apart: the short keep-alive timeout would end the flood's connection between two of its streams.
  beforeAll(async () => {
    ;[limited, idling] = await Promise.all([
      fleet.pinboard({
        env: {
          PINBOARD_H2C: "1",
          PINBOARD_HTTP2_MAX_CONCURRENT_STREAMS: "9",
          PINBOARD_HTTP2_MAX_HEADER_LIST_SIZE: "4096",
          PINBOARD_HTTP2_STREAM_RESET_BURST: "5",
          PINBOARD_HTTP2_STREAM_RESET_RATE: "1"
        }
      }),
      fleet.pinboard({ env: { PINBOARD_H2C: "1", PINBOARD_KEEPALIVE_TIMEOUT_MS: "400" } })
    ])
  }, scaled(60_000))

  it("SETTINGS as set; a header list past its size is reset unread", async () => {
    const limits = await h2Connect(limited.url)
    try {
      expect([limits.remoteSettings.maxConcurrentStreams, limits.remoteSettings.maxHeaderListSize]).toStrictEqual([9, 4096])
      await expect(h2Request(limits, "/healthz", { headers: { "x-big": "x".repeat(5000) } })).rejects.toThrow("NGHTTP2_ENHANCE_YOUR_CALM")
    } finally {
      limits.close()
    }
  })

  it("an idle connection is closed after the keep-alive timeout", async () => {
    // Listened for from the start: the timeout runs from the connection's first moment.
    const idle = http2.connect(idling.url)
    idle.on("error", () => undefined)
    const goneIdle = new Promise<number>((resolve) => idle.once("goaway", (code: number) => resolve(code)))
    expect(await goneIdle).toBe(http2.constants.NGHTTP2_NO_ERROR)
    idle.destroy()
  })

  it("a reset flood ends its connection with ENHANCE_YOUR_CALM, logged; Pinboard serves on", async () => {
    const flood = await h2Connect(limited.url)
    let told: number | undefined
    const goaway = new Promise<number>((resolve) => flood.once("goaway", (code: number) => resolve((told = code))))
    // Streams whose answer cannot have begun (a registration whose body never comes), each cancelled once sent,
    // until the GOAWAY: a loaded machine can run the loop slowly enough for the refill to keep up a while.
    for (let i = 0; i < 500 && told === undefined && !flood.closed && !flood.destroyed; i++) {
      const stream = flood.request(
        { ":method": "POST", ":path": "/registry/workers", authorization: `Bearer ${TOKEN}`, "content-length": "1000" },
        { endStream: false }
      )
      stream.on("error", () => undefined)
      // Its id, or its end: the GOAWAY may come while it waits for one.
      if (stream.pending) await new Promise((resolve) => (stream.once("ready", resolve), stream.once("close", resolve)))
      stream.close(http2.constants.NGHTTP2_CANCEL)
      await new Promise((resolve) => setImmediate(resolve))
    }
    expect(await goaway).toBe(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM)
    await eventually(() => expect(limited.process.lines.some((line) => line.includes("too many streams cancelled before their answer"))).toBe(true))
    expect((await request(limited, "/healthz")).status).toBe(200)
  })
})

describe("h2c behind a PROXY protocol balancer", () => {
  let proxied: Pinboard
  const viaProxy = (): Promise<ClientHttp2Session> =>
    h2Connect(proxied.url, {
      createConnection: () => {
        const socket = net.connect(proxied.port, "127.0.0.1")
        socket.write("PROXY TCP4 203.0.113.9 127.0.0.1 40000 80\r\n")
        return socket
      }
    })
  beforeAll(async () => {
    // The workers register on the registry's own listener: every connection to the data port must open with a PROXY header.
    proxied = await fleet.pinboard({ registryPort: true, env: { PINBOARD_H2C: "1", PINBOARD_PROXY_PROTOCOL: "1", PINBOARD_ACCESS_LOG: "1" } })
    await fleet.worker(proxied, { id: uid("px"), namespaces: [NS] })
    await waitForColdStart(proxied, NS, undefined, async (path) => {
      const connection = await viaProxy()
      try {
        return await h2Request(connection, path)
      } finally {
        connection.close()
      }
    })
  }, scaled(60_000))

  it("the header comes first, then the preface: the worker and the access log get the header's client", async () => {
    const connection = await viaProxy()
    try {
      const id = uid("px")
      const answer = await h2Request(connection, `${NS}/${id}/echo`)
      expect(answer.status).toBe(200)
      expect((JSON.parse(answer.text) as Echo).headers["x-forwarded-for"]).toBe("203.0.113.9")
      await eventually(() => {
        const line = proxied.process.lines.find((text) => text.includes('"message":"access"') && text.includes(`/${id}/`))
        expect(JSON.parse(line!)).toMatchObject({ client: "203.0.113.9" })
      })
    } finally {
      connection.close()
    }
  })
})

describe("without PINBOARD_H2C", () => {
  let plain: Pinboard
  beforeAll(async () => {
    plain = await fleet.pinboard()
  }, scaled(60_000))

  it("a plain listener stays HTTP/1.1: the preface gets no HTTP/2", async () => {
    const outcome = await h2Connect(plain.url).then(
      async (connection) => {
        try {
          await h2Request(connection, "/healthz", { timeoutMs: 2000 })
          return "answered"
        } catch {
          return "refused"
        } finally {
          connection.destroy()
        }
      },
      () => "refused"
    )
    expect(outcome).toBe("refused")
    expect((await request(plain, "/healthz")).status).toBe(200)
  })
})
