// Route matching in the worker (docs/worker.md "Instances"): a path routed for other methods
// answers 405 with `Allow` (RFC 9110, section 15.5.6), HEAD is served by the GET route without a
// body and with GET's headers, `"* /path"` and `fetch` come before a 405. Real HTTP against the
// assembled worker on TestClock, with a registry the test plays.
import { describe, expect, it } from "@effect/vitest"
import net from "node:net"
import { Effect } from "effect"
import { makeAttestationSigner } from "../../src/auth/Attestation.js"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import { defineInstance } from "../../src/worker/Definition.js"
import type { RegistryClient } from "../../src/worker/RegistryClient.js"
import { matchRoute } from "../../src/worker/Routes.js"
import { makeWorker } from "../../src/worker/Worker.js"
import { until } from "../support/Turns.js"
import { scaled } from "../support/Time.js"

const TOKEN = "routes-test-token"
const WORKER = "w1"
const sign = makeAttestationSigner({ alg: "HS256", secret: attestationKey(TOKEN) })

const registry = (): RegistryClient & { registered: boolean } => {
  const client = {
    registered: false,
    register: async () => {
      client.registered = true
      return { incarnation: "inc-1", leaseMs: 3000, heartbeatMs: 1000, unrenewed: [] }
    },
    heartbeat: async () => ({ _tag: "Renewed" as const, windDown: [], unrenewed: [] }),
    release: async () => true,
    deregister: async () => {}
  }
  return client
}

const doc = defineInstance({
  activate: () => ({ text: "hello, wörld" }),
  routes: {
    // node computes this answer's Content-Length itself.
    "GET /text": ({ state }, res) => {
      res.setHeader("content-type", "text/plain; charset=utf-8")
      res.setHeader("etag", '"v1"')
      res.end(state.text)
    },
    "PUT /text": (_request, res) => res.end("put"),
    "GET /sized": (_request, res) => res.writeHead(200, { "content-length": "5" }).end("12345"),
    "GET /pieces": (_request, res) => {
      res.write("12")
      res.end("345")
    },
    "POST /increment": (_request, res) => res.end("1"),
    "HEAD /own-head": (_request, res) => res.writeHead(204, { "x-own": "yes" }).end(),
    "GET /own-head": (_request, res) => res.end("get"),
    "* /any": ({ req }, res) => res.end(req.method)
  }
})

const withFetch = defineInstance({
  activate: () => ({}),
  routes: { "POST /increment": (_request, res) => res.end("1") },
  fetch: ({ req, path }, res) => res.end(`fetch ${req.method} ${path}`)
})

const claims = (namespace: string, id: string) => ({
  worker: WORKER,
  namespace,
  id,
  epoch: "5",
  depth: 0,
  principal: undefined,
  caller: undefined
})

/** One request on its own connection, read to the close: the bytes as they came. */
const exchange = (port: number, method: string, path: string, attestation: string) =>
  new Promise<{ status: number; headers: Record<string, string>; body: string }>((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    const timer = setTimeout(() => socket.destroy(new Error(`${method} ${path}: no close`)), scaled(5000))
    socket.on("data", (chunk) => chunks.push(chunk))
    socket.on("error", reject)
    socket.on("close", () => {
      clearTimeout(timer)
      const raw = Buffer.concat(chunks).toString("utf8")
      const end = raw.indexOf("\r\n\r\n")
      const [statusLine, ...lines] = raw.slice(0, end).split("\r\n")
      const headers: Record<string, string> = {}
      for (const line of lines) {
        const colon = line.indexOf(":")
        const name = line.slice(0, colon).toLowerCase()
        if (name !== "date") headers[name] = line.slice(colon + 1).trim()
      }
      resolve({ status: Number(statusLine!.split(" ")[1]), headers, body: raw.slice(end + 4) })
    })
    socket.write(`${method} ${path} HTTP/1.1\r\nhost: w\r\npinboard-attestation: ${attestation}\r\nconnection: close\r\n\r\n`)
  })

const setup = Effect.gen(function* () {
  const client = registry()
  const worker = yield* makeWorker({
    pinboard: "http://127.0.0.1:1",
    token: TOKEN,
    worker: WORKER,
    instances: { "/docs": doc, "/counters": withFetch },
    registry: client,
    log: () => {}
  })
  yield* until(() => client.registered, "the registration")
  yield* until(worker.healthy, "a healthy lease")
  return (method: string, namespace: string, id: string, rest: string) =>
    Effect.promise(() => exchange(worker.port, method, `${namespace}/${id}${rest}`, sign(claims(namespace, id), 0)))
})

const notAllowed = (allow: string) => ({
  status: 405,
  headers: { "content-type": "application/json", allow, "content-length": "30", connection: "close" },
  body: '{"error":"method not allowed"}'
})

describe("the worker's routes", () => {
  it.effect("a known path with another method: 405 with Allow naming the routed methods, HEAD beside GET", () =>
    Effect.gen(function* () {
      const send = yield* setup
      expect(yield* send("DELETE", "/docs", "d1", "/text")).toEqual(notAllowed("GET, PUT, HEAD"))
      expect(yield* send("GET", "/docs", "d1", "/increment")).toEqual(notAllowed("POST"))
      expect(yield* send("OPTIONS", "/docs", "d1", "/own-head")).toEqual(notAllowed("HEAD, GET"))
      // No route for the path at all: still 404.
      const unknown = yield* send("DELETE", "/docs", "d1", "/nothing")
      expect([unknown.status, unknown.body]).toEqual([404, '{"error":"not found"}'])
      // `* /path` takes every method, and `fetch` every request no route matched: no 405 from either.
      expect((yield* send("DELETE", "/docs", "d1", "/any")).body).toBe("DELETE")
      expect((yield* send("GET", "/counters", "c1", "/increment")).body).toBe("fetch GET /increment")
    })
  )

  it.effect("HEAD is served by the GET route: GET's status and headers, Content-Length included, and no body", () =>
    Effect.gen(function* () {
      const send = yield* setup
      const get = yield* send("GET", "/docs", "d1", "/text")
      const head = yield* send("HEAD", "/docs", "d1", "/text")
      expect(get.body).toBe("hello, wörld")
      expect(get.headers["content-length"]).toBe(String(Buffer.byteLength("hello, wörld")))
      expect(head).toEqual({ status: 200, headers: get.headers, body: "" })
      // A length the handler set is kept; a body written in pieces has none, as GET is chunked.
      const sized = yield* send("HEAD", "/docs", "d1", "/sized")
      expect([sized.status, sized.headers["content-length"], sized.body]).toEqual([200, "5", ""])
      const pieces = yield* send("GET", "/docs", "d1", "/pieces")
      expect(pieces.headers["transfer-encoding"]).toBe("chunked")
      const headPieces = yield* send("HEAD", "/docs", "d1", "/pieces")
      expect([headPieces.status, headPieces.headers["content-length"], headPieces.body]).toEqual([200, undefined, ""])
      // A route of its own for HEAD wins over GET's.
      const own = yield* send("HEAD", "/docs", "d1", "/own-head")
      expect([own.status, own.headers["x-own"], own.body]).toEqual([204, "yes", ""])
    })
  )
})

describe("matchRoute", () => {
  it("tries METHOD /path, * /path, GET for HEAD, fetch, then 405 or 404", () => {
    const handler = () => {}
    const other = () => {}
    const definition = defineInstance({ activate: () => ({}), routes: { "GET /a": handler, "* /b": other, "POST /a": other } })
    expect(matchRoute(definition, "GET", "/a")).toEqual({ _tag: "Route", handler, headFromGet: false })
    expect(matchRoute(definition, "HEAD", "/a")).toEqual({ _tag: "Route", handler, headFromGet: true })
    expect(matchRoute(definition, "HEAD", "/b")).toEqual({ _tag: "Route", handler: other, headFromGet: false })
    expect(matchRoute(definition, "PATCH", "/a")).toEqual({ _tag: "MethodNotAllowed", allow: "GET, POST, HEAD" })
    expect(matchRoute(definition, "GET", "/c")).toEqual({ _tag: "NotFound" })
    expect(matchRoute({ ...definition, fetch: other }, "PATCH", "/a")).toEqual({ _tag: "Route", handler: other, headFromGet: false })
  })
})
