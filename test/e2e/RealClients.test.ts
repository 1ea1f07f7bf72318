// What clients nobody on the project wrote send, and the answer HTTP promises them (docs/proxy.md
// "What every client gets"): the h2c upgrade offer byte for byte as curl 7.88 and Java 17's
// HttpClient write it, raw sockets for the Host and framing rules of RFC 9112, trailers, why a
// 502, and curl and Java themselves when they are on the PATH. The built Pinboard with the
// embedded registry, access log on and debug logs, and one fixture worker.
import { execFile } from "node:child_process"
import http from "node:http"
import { createHash } from "node:crypto"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually, Fleet, STANDARD_CONFIG, uid, waitForColdStart, type Pinboard } from "../support/Fleet.js"
import { freePort } from "../support/Processes.js"
import { headerValues, rawConnection, rawExchange, rawUpgradeHead, type RawResponse } from "../support/Wire.js"
import { scaled } from "../support/Time.js"

const run = promisify(execFile)
const JAVA_CLIENT = new URL("../fixtures/H2cClient.java", import.meta.url).pathname

const onPath = async (command: string): Promise<boolean> =>
  run("sh", ["-c", `command -v ${command}`]).then(
    () => true,
    () => false
  )
const [curlOnPath, javaOnPath] = await Promise.all([onPath("curl"), onPath("java")])

// The h2c offers as captured off the wire (a listener that printed what it read), with the
// Host's port and the path put in place.
const curlGet = (port: number, path: string) =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n` +
  "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
const curlPost = (port: number, path: string) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n` +
  "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n" +
  'Content-Length: 7\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\n{"a":1}'
/** `curl --http2 -T file`: the body waits for `100 Continue`. */
const curlUploadHead = (port: number, path: string) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n` +
  "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n" +
  "Content-Length: 3\r\nExpect: 100-continue\r\n\r\n"
const javaGet = (port: number, path: string) =>
  `GET ${path} HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\nContent-Length: 0\r\nHost: 127.0.0.1:${port}\r\n` +
  "HTTP2-Settings: AAEAAEAAAAIAAAAAAAMAAAAAAAQBAAAAAAUAAEAAAAYABgAA\r\nUpgrade: h2c\r\nUser-Agent: Java-http-client/17.0.15\r\n\r\n"
const javaPost = (port: number, path: string) =>
  `POST ${path} HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\nContent-Length: 16\r\nHost: 127.0.0.1:${port}\r\n` +
  "HTTP2-Settings: AAEAAEAAAAIAAAAAAAMAAAAAAAQBAAAAAAUAAEAAAAYABgAA\r\nUpgrade: h2c\r\nUser-Agent: Java-http-client/17.0.15\r\n" +
  'Content-Type: application/json\r\n\r\n{"hello":"java"}'

interface Echo {
  readonly worker: string
  readonly method: string
  readonly url: string
  readonly headers: Record<string, string>
  readonly bodyBytes: number
  readonly bodySha256: string
}

const echoOf = (response: RawResponse): Echo => {
  expect(response.status, response.body.toString()).toBe(200)
  return JSON.parse(response.body.toString()) as Echo
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")

/** What the worker must never see of an offer Pinboard declined. */
const expectNoOffer = (echo: Echo) => {
  expect(echo.headers).not.toHaveProperty("upgrade")
  expect(echo.headers).not.toHaveProperty("http2-settings")
  expect(String(echo.headers["connection"] ?? "")).not.toMatch(/upgrade|http2-settings/i)
}

interface LogLine {
  readonly message: string
  readonly level: string
  readonly [field: string]: unknown
}

const logLines = (pinboard: Pinboard): Array<LogLine> =>
  pinboard.process.lines.flatMap((text) => {
    try {
      return [JSON.parse(text) as LogLine]
    } catch {
      return []
    }
  })

/** The access line for `path`, once written (when the exchange closes). */
const accessLine = (pinboard: Pinboard, path: string): Promise<LogLine> =>
  eventually(() => {
    const lines = logLines(pinboard).filter((line) => line.message === "access" && line.path === path)
    expect(lines).toHaveLength(1)
    return lines[0]!
  })

describe("real clients (embedded registry)", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  let port: number

  beforeAll(async () => {
    pinboard = await fleet.pinboard({ config: { ...STANDARD_CONFIG, log: { access: true, level: "debug" } } })
    port = pinboard.port
    await fleet.worker(pinboard, { id: "wa", namespaces: ["/threads"] })
    await waitForColdStart(pinboard, "/threads")
  }, scaled(60_000))
  afterAll(() => fleet.stop())

  describe("an upgrade offer other than WebSocket is an ordinary request", () => {
    it("curl --http2, GET: the worker's whole answer; the worker sees no Upgrade, HTTP2-Settings or their Connection tokens", async () => {
      const path = `/threads/${uid("h2c")}/echo?x=1`
      const connection = await rawConnection(port)
      connection.write(curlGet(port, path))
      const [response] = await connection.responses(1)
      connection.close()
      const echo = echoOf(response!)
      expect({ method: echo.method, url: echo.url, bodyBytes: echo.bodyBytes }).toEqual({ method: "GET", url: path, bodyBytes: 0 })
      expect(echo.headers["user-agent"]).toBe("curl/7.88.1")
      expect(echo.headers["pinboard-epoch"]).toMatch(/^\d+$/)
      expectNoOffer(echo)
      expect(headerValues(response!.rawHeaders, "x-accel-buffering")).toEqual(["no"])
    })

    it("curl --http2, POST: the body reaches the worker whole", async () => {
      const connection = await rawConnection(port)
      connection.write(curlPost(port, `/threads/${uid("h2c")}/upload`))
      const echo = echoOf((await connection.responses(1))[0]!)
      connection.close()
      expect({ method: echo.method, bodyBytes: echo.bodyBytes, bodySha256: echo.bodySha256 }).toEqual({
        method: "POST",
        bodyBytes: 7,
        bodySha256: sha256('{"a":1}')
      })
      expectNoOffer(echo)
    })

    it("curl --http2 -T: Expect: 100-continue gets its 100 Continue, then the upload is answered", async () => {
      const connection = await rawConnection(port)
      connection.write(curlUploadHead(port, `/threads/${uid("h2c")}/upload`))
      const [interim] = await connection.responses(1)
      expect(interim!.statusLine).toBe("HTTP/1.1 100 Continue")
      connection.write("abc")
      const [, final] = await connection.responses(2)
      connection.close()
      const echo = echoOf(final!)
      expect({ bodyBytes: echo.bodyBytes, bodySha256: echo.bodySha256 }).toEqual({ bodyBytes: 3, bodySha256: sha256("abc") })
      expect(echo.headers).not.toHaveProperty("expect")
      expectNoOffer(echo)
    })

    it("Java's HttpClient, GET then POST on one connection: both answered in order, the POST's body whole", async () => {
      const getPath = `/threads/${uid("java")}/echo`
      const postPath = `/threads/${uid("java")}/upload`
      const connection = await rawConnection(port)
      connection.write(javaGet(port, getPath))
      const [got] = await connection.responses(1)
      connection.write(javaPost(port, postPath))
      const [, posted] = await connection.responses(2)
      connection.close()
      expect(echoOf(got!)).toMatchObject({ method: "GET", url: getPath, bodyBytes: 0 })
      const echo = echoOf(posted!)
      expect(echo).toMatchObject({ method: "POST", url: postPath, bodyBytes: 16, bodySha256: sha256('{"hello":"java"}') })
      expect(echo.headers["content-type"]).toBe("application/json")
      expectNoOffer(echo)
    })

    it("a request pipelined behind an offer, in the same packet, is answered after it", async () => {
      const connection = await rawConnection(port)
      const second = `/threads/${uid("pipe")}/echo`
      connection.write(curlPost(port, `/threads/${uid("pipe")}/upload`) + `GET ${second} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)
      const [first, next] = await connection.responses(2)
      connection.close()
      expect(echoOf(first!).bodyBytes).toBe(7)
      expect(echoOf(next!)).toMatchObject({ method: "GET", url: second })
    })

    it("an offer pipelined behind a request still awaiting its answer is answered after it, in order", async () => {
      const connection = await rawConnection(port)
      const slow = `/threads/${uid("slow")}/slow-headers`
      connection.write(`GET ${slow}?ms=300 HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n` + javaPost(port, `/threads/${uid("pipe")}/upload`))
      const [first, next] = await connection.responses(2)
      connection.close()
      expect(echoOf(first!)).toMatchObject({ method: "GET", url: `${slow}?ms=300` })
      expect(echoOf(next!)).toMatchObject({ method: "POST", bodyBytes: 16 })
    })

    it("an offer to /healthz or /registry/* is that route's ordinary request", async () => {
      const connection = await rawConnection(port)
      connection.write(curlGet(port, "/healthz"))
      connection.write(curlGet(port, "/registry/workers"))
      const [health, registry] = await connection.responses(2)
      connection.close()
      expect(health!.status).toBe(200)
      expect(registry!.status).toBe(401)
      expect(registry!.body.toString()).toBe('{"error":"invalid deployment token"}')
    })

    it("a WebSocket offer is still the tunnel: the worker's 101", async () => {
      const connection = await rawConnection(port)
      try {
        connection.write(rawUpgradeHead(`/threads/${uid("ws")}/ws`))
        const [response] = await connection.responses(1)
        expect(response!.statusLine).toMatch(/^HTTP\/1\.1 101 /)
      } finally {
        connection.close()
      }
    })

    it.runIf(curlOnPath)("curl --http2 itself, GET and POST: the worker's answers", async () => {
      const url = `${pinboard.url}/threads/${uid("curl")}/upload`
      const got = await run("curl", ["-sS", "--http2", "--max-time", "10", "-w", "\\n%{http_code} %{http_version}", url])
      const [getBody, getStatus] = got.stdout.split("\n")
      expect(getStatus).toBe("200 1.1")
      expect(JSON.parse(getBody!)).toMatchObject({ method: "GET", bodyBytes: 0 })
      const posted = await run("curl", ["-sS", "--http2", "--max-time", "10", "-d", '{"from":"curl"}', "-w", "\\n%{http_code}", url])
      const [postBody, postStatus] = posted.stdout.split("\n")
      expect(postStatus).toBe("200")
      const echo = JSON.parse(postBody!) as Echo
      expect(echo).toMatchObject({ method: "POST", bodyBytes: 15, bodySha256: sha256('{"from":"curl"}') })
      expectNoOffer(echo)
    })

    it.runIf(javaOnPath)(
      "Java's HttpClient itself (HTTP/2 by default), GET and POST: the worker's answers",
      async () => {
        const url = `${pinboard.url}/threads/${uid("java")}/upload`
        const { stdout } = await run("java", [JAVA_CLIENT, url], { timeout: 60_000 })
        const [got, posted] = stdout.trim().split("\n")
        expect(got).toMatch(/^200 HTTP_1_1 /)
        expect(JSON.parse(got!.replace(/^200 HTTP_1_1 /, ""))).toMatchObject({ method: "GET", bodyBytes: 0 })
        expect(posted).toMatch(/^200 HTTP_1_1 /)
        const echo = JSON.parse(posted!.replace(/^200 HTTP_1_1 /, "")) as Echo
        expect(echo).toMatchObject({ method: "POST", bodyBytes: 16, bodySha256: sha256('{"hello":"java"}') })
        expectNoOffer(echo)
      },
      scaled(90_000)
    )
  })

  describe("Host (RFC 9112 3.2)", () => {
    const get = (target: string, version: "1.0" | "1.1", headers: string) => `GET ${target} HTTP/${version}\r\n${headers}Connection: close\r\n\r\n`

    it("HTTP/1.1 without Host: 400 missing Host header, on instance paths and Pinboard's own alike", async () => {
      for (const target of [`/threads/${uid("nohost")}/echo`, "/healthz"]) {
        const exchange = await rawExchange(port, get(target, "1.1", ""))
        const text = exchange.bytes.toString("latin1")
        expect(text, target).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/)
        expect(text, target).toMatch(/\r\n\r\n\{"error":"missing Host header"\}$/)
      }
    })

    it("HTTP/1.0 without Host is forwarded", async () => {
      const exchange = await rawExchange(port, get(`/threads/${uid("http10")}/echo`, "1.0", ""))
      expect(exchange.bytes.toString("latin1")).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    })

    it("two Host lines: 400 more than one Host header, in either version, equal or not; logged as RepeatedHost", async () => {
      const path = `/threads/${uid("twohosts")}/echo`
      for (const [version, hosts] of [
        ["1.1", "Host: a.example\r\nHost: b.example\r\n"],
        ["1.1", "Host: a.example\r\nhost: a.example\r\n"],
        ["1.0", "HOST: a.example\r\nHost: b.example\r\n"]
      ] as const) {
        const exchange = await rawExchange(port, get(path, version, hosts))
        const text = exchange.bytes.toString("latin1")
        expect(text, hosts).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/)
        expect(text, hosts).toMatch(/\r\n\r\n\{"error":"more than one Host header"\}$/)
      }
      const health = await rawExchange(port, get("/healthz", "1.1", "Host: a\r\nHost: b\r\n"))
      expect(health.bytes.toString("latin1")).toMatch(/^HTTP\/1\.1 400 /)
      const logged = await eventually(() => {
        const lines = logLines(pinboard).filter((line) => line.message === "access" && line.path === path)
        expect(lines).toHaveLength(3)
        return lines
      })
      for (const line of logged) expect(line).toMatchObject({ status: 400, error: "RepeatedHost" })
    })

    it("a WebSocket upgrade with two Host lines: a bare 400 status line", async () => {
      const head = rawUpgradeHead(`/threads/${uid("ws")}/ws`, [["Host", "b.example"]])
      const exchange = await rawExchange(port, head)
      expect(exchange.bytes.toString("latin1")).toBe("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n")
      expect(exchange.closed).toBe(true)
    })
  })

  describe("framing Pinboard does not decode", () => {
    it("Transfer-Encoding: gzip, chunked: 501 transfer coding not implemented; nothing reaches the worker", async () => {
      const key = uid("key")
      const exchange = await rawExchange(
        port,
        `POST /threads/${uid("gzip")}/upload?key=${key} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n`
      )
      const text = exchange.bytes.toString("latin1")
      expect(text).toMatch(/^HTTP\/1\.1 501 Not Implemented\r\n/)
      expect(text).toMatch(/content-type: application\/json\r\n/)
      expect(text).toMatch(/\r\n\r\n\{"error":"transfer coding not implemented"\}$/)
      expect(fleet.keyLog(key)).toEqual([])
    })

    it("Transfer-Encoding: chunked, however cased, is forwarded", async () => {
      const exchange = await rawExchange(
        port,
        `POST /threads/${uid("chunked")}/upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n`
      )
      const text = exchange.bytes.toString("latin1")
      expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
      expect(text).toContain('"bodyBytes":3')
    })

    it("CONNECT: a bare 501 status line, then the connection closes", async () => {
      const exchange = await rawExchange(port, "CONNECT worker.example:443 HTTP/1.1\r\nHost: worker.example:443\r\n\r\n")
      expect(exchange.bytes.toString("latin1")).toBe("HTTP/1.1 501 Not Implemented\r\nconnection: close\r\n\r\n")
      expect(exchange.closed).toBe(true)
    })
  })

  it("response trailers of a chunked response reach the client, less Pinboard-*; the Trailer header is stripped", async () => {
    const path = `/threads/${uid("trailers")}/trailers`
    const answer = await new Promise<{ body: string; trailers: NodeJS.Dict<string>; rawTrailers: Array<string>; headers: http.IncomingHttpHeaders }>(
      (resolve, reject) => {
        const req = http.get({ host: "127.0.0.1", port, path, agent: false, headers: { te: "trailers" } }, (res) => {
          let body = ""
          res.setEncoding("utf8")
          res.on("data", (chunk: string) => (body += chunk))
          res.on("end", () => resolve({ body, trailers: res.trailers, rawTrailers: res.rawTrailers, headers: res.headers }))
          res.on("error", reject)
        })
        req.on("error", reject)
      }
    )
    expect(answer.body).toBe("part one, part two")
    expect(answer.headers["transfer-encoding"]).toBe("chunked")
    expect(answer.headers).not.toHaveProperty("trailer")
    expect(answer.trailers["x-checksum"]).toBe("abc123")
    expect(headerValues(answer.rawTrailers, "server-timing")).toEqual(["db;dur=3", "app;dur=5"])
    expect(answer.trailers).not.toHaveProperty("pinboard-secret")
  })

  describe("why a 502: the access log's reason, and a debug line", () => {
    const badGateway = async (path: string, reason: string, query = "") => {
      const exchange = await rawExchange(port, `GET ${path}${query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
      expect(exchange.bytes.toString("latin1")).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n[^]*\r\n\r\nbad gateway$/)
      expect(await accessLine(pinboard, path)).toMatchObject({ status: 502, error: "BadGateway", reason })
      const debug = await eventually(() => {
        const found = logLines(pinboard).find((line) => line.message === "bad gateway" && line.reason === reason)
        expect(found).toBeDefined()
        return found!
      })
      expect(debug).toMatchObject({ level: "debug", error: "BadGateway", namespace: expect.any(String), worker: expect.any(String) })
    }

    it("connect refused: a worker registered on a port nobody listens on", async () => {
      const dead = await freePort()
      await fleet.virtualWorker(pinboard, { id: uid("dead"), advertiseUrl: `http://127.0.0.1:${dead}`, namespaces: ["/refused"] })
      await badGateway(`/refused/${uid("id")}/x`, "connect refused")
    })

    it("reset before headers: the worker closes the connection without answering", async () => {
      await badGateway(`/threads/${uid("reset")}/reset`, "reset before headers", "?before=1")
    })

    it("header overflow: the worker's response head is larger than Node's header limit", async () => {
      await badGateway(`/threads/${uid("huge")}/huge-headers`, "header overflow")
    })

    it("parse error: the worker answers with bytes that are not HTTP", async () => {
      await badGateway(`/threads/${uid("garbage")}/garbage`, "parse error")
    })
  })
})
