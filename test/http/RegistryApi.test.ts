// The registry API over HTTP (docs/registry-api.md), against the embedded registry and a real
// redis-server: answers, the bad-input matrix (documented 4xx, registry unchanged), probes,
// and a Redis outage (503 with Retry-After, never a hang) followed by recovery.
import http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { redisSection } from "../support/TestConfig.js"
import type { PinboardConfig } from "../../src/Config.js"
import { startRedisServer, type RedisServer } from "../support/RedisServer.js"
import { startPinboard, type TestPinboard } from "../support/TestPinboard.js"
import { poll as pollFor, scaled } from "../support/Time.js"
import { request, type Answer as WireAnswer, type RequestOptions } from "../support/Wire.js"

const TOKEN = "test-token"
const LEASE_MS = 1000
const JSON_TYPE = "application/json"

// --- HTTP client: Wire.ts's request, with the JSON read and the time the answer took ---

interface Answer extends WireAnswer {
  readonly json: unknown
  readonly elapsedMs: number
}

interface Send {
  readonly method?: string
  /** Serialized with JSON.stringify. */
  readonly body?: unknown
  /** Sent byte for byte; wins over `body`. */
  readonly raw?: string
  /** `null`: no Authorization header at all. */
  readonly authorization?: string | null
}

const BEARER = `Bearer ${TOKEN}`
// As fetch sends it: on a kept-alive connection Pinboard drains a body it refused (413) instead
// of closing the connection while the client is still sending.
const KEEP_ALIVE: [string, string] = ["connection", "keep-alive"]

const timedRequest = async (pb: TestPinboard, path: string, options: RequestOptions): Promise<Answer> => {
  const started = performance.now()
  // A hang is a failure of its own, not a test timeout.
  const answer = await request(pb, path, { ...options, timeoutMs: 5000 })
  const elapsedMs = performance.now() - started
  const json: unknown = answer.headers["content-type"] === JSON_TYPE && answer.text !== "" ? JSON.parse(answer.text) : undefined
  return { ...answer, json, elapsedMs }
}

const send = (pb: TestPinboard, path: string, options: Send = {}): Promise<Answer> => {
  const headers: Array<[string, string]> = [KEEP_ALIVE]
  const authorization = options.authorization === undefined ? BEARER : options.authorization
  if (authorization !== null) headers.push(["authorization", authorization])
  const payload = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body))
  if (payload !== undefined) headers.push(["content-type", JSON_TYPE])
  return timedRequest(pb, path, {
    method: options.method ?? (payload === undefined ? "GET" : "POST"),
    headers,
    ...(payload === undefined ? {} : { body: payload })
  })
}

/** A body over the limit sent with `transfer-encoding: chunked` (no Content-Length), 64 KiB a chunk. */
const sendChunked = (pb: TestPinboard, path: string, totalBytes: number): Promise<Answer> => {
  const chunk = Buffer.alloc(64 * 1024, "a")
  const chunks = Array.from({ length: Math.ceil(totalBytes / chunk.length) }, () => chunk)
  return timedRequest(pb, path, {
    method: "POST",
    headers: [
      KEEP_ALIVE,
      ["authorization", BEARER],
      ["content-type", JSON_TYPE],
      ["transfer-encoding", "chunked"]
    ],
    body: ['{"worker":"', ...chunks, '"}']
  })
}

const expectJson = (answer: Answer, status: number, body: unknown): void => {
  expect({ status: answer.status, body: answer.json }).toEqual({ status, body })
  expect(answer.headers["content-type"]).toBe(JSON_TYPE)
}

const errorPattern = (field: string) => new RegExp(`^${field.replace(/[[\]]/g, "\\$&")}(\\[\\d+\\])?: \\S`)

/** `400 {"error":"<field>: ..."}` naming the field. */
const expectBadRequest = (answer: Answer, field: string): void => {
  expect(answer.status, answer.text).toBe(400)
  expect(answer.headers["content-type"]).toBe(JSON_TYPE)
  expect(Object.keys(answer.json as object)).toEqual(["error"])
  expect((answer.json as { error: string }).error).toMatch(errorPattern(field))
}

const field = <A>(answer: Answer, name: string): A => (answer.json as Record<string, A>)[name]!

/** Polls `attempt` until it answers something; fails naming `what` after `timeoutMs` (nominal, scaled). */
const poll = <A>(what: string, timeoutMs: number, attempt: () => Promise<A | undefined>): Promise<A> =>
  pollFor(attempt, { timeoutMs, reason: what })

// --- Registry calls ---

const register = (pb: TestPinboard, body: Record<string, unknown>) => send(pb, "/registry/workers", { body })

const heartbeat = (pb: TestPinboard, worker: string, body: Record<string, unknown>) =>
  send(pb, `/registry/workers/${worker}/heartbeat`, { body })

const workersOf = async (pb: TestPinboard): Promise<unknown> => {
  const answer = await send(pb, "/registry/workers")
  expect(answer.status).toBe(200)
  return answer.json
}

const placementOf = (pb: TestPinboard, namespace: string, id: string) =>
  send(pb, `/registry/placements/${namespace.slice(1)}/${id}`)

/**
 * Registers `worker` for `namespace` and places `id` on it: instance requests answer
 * `503 registry cold start` for one lease after the bucket's first use, so poll, renewing
 * the lease meanwhile (it is as short as the cold start). Answers the incarnation.
 */
const placeOnWorker = async (pb: TestPinboard, worker: string, advertiseUrl: string, namespace: string, id: string) => {
  const registered = await register(pb, { worker, advertiseUrl, namespaces: [namespace], headroom: 5 })
  expect(registered.status, registered.text).toBe(200)
  const incarnation = field<string>(registered, "incarnation")
  const forwarded = await poll(`placing ${namespace}/${id}`, 10 * LEASE_MS, async () => {
    const renewed = await heartbeat(pb, worker, { incarnation, headroom: 5 })
    expect(renewed.status, renewed.text).toBe(200)
    const answer = await send(pb, `${namespace}/${id}/x`, { authorization: null })
    if (answer.status !== 503) return answer
    expect(answer.json).toEqual({ error: "registry cold start, retry" })
    expect(Number(answer.headers["retry-after"])).toBeGreaterThanOrEqual(1)
    return undefined
  })
  expect(forwarded.status, forwarded.text).toBe(200)
  expect(forwarded.text).toBe(`worker ${worker} saw GET ${namespace}/${id}/x`)
  return incarnation
}

// --- A tiny worker ---

interface TinyWorker {
  readonly url: string
  readonly close: () => Promise<void>
}

const startWorker = (name: string): Promise<TinyWorker> =>
  new Promise((resolve) => {
    const server = http.createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/plain" })
        res.end(`worker ${name} saw ${req.method} ${req.url}`)
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done())
            server.closeAllConnections()
          })
      })
    })
  })

// --- The two registries ---

let prefixes = 0
const backends = [
  { name: "embedded registry", redis: false },
  { name: "Redis registry", redis: true }
] as const

describe.each(backends)("registry API on the $name", ({ redis }) => {
  let redisServer: RedisServer | undefined
  const workers = new Map<string, TinyWorker>()

  beforeAll(async () => {
    if (redis) redisServer = await startRedisServer()
    for (const name of ["w1", "w2", "w-main"]) workers.set(name, await startWorker(name))
  })
  afterAll(async () => {
    for (const worker of workers.values()) await worker.close()
    await redisServer?.stop()
  })

  const urlOf = (worker: string) => workers.get(worker)!.url

  /** Pinboard with a short lease; on Redis, under a prefix of its own. */
  const start = (overrides: Partial<PinboardConfig> = {}) =>
    startPinboard({
      leaseMs: LEASE_MS,
      ...(redis ? { redis: redisSection({ url: redisServer!.url, prefix: `pbtest${++prefixes}` }) } : {}),
      ...overrides
    })

  describe("answers", () => {
    let pb: TestPinboard
    beforeEach(async () => {
      pb = await start()
    })
    afterEach(async () => {
      await pb.stop()
    })

    // A sample's error is up to half its round trip to Redis: a few ms, more on a busy
    // machine (6 ms seen with another test run beside this one).
    const CLOCK_ESTIMATE_MS = 25

    it("register answers the worker, a string incarnation, leaseMs, heartbeatMs = floor(leaseMs / 3) and the lease expiry", async () => {
      const before = Date.now()
      const answer = await register(pb, { worker: "w1", advertiseUrl: urlOf("w1"), namespaces: ["/threads"], headroom: 3 })
      const after = Date.now()
      expect(answer.status).toBe(200)
      expect(answer.headers["content-type"]).toBe(JSON_TYPE)
      expect(answer.json).toEqual({
        worker: "w1",
        incarnation: expect.any(String),
        leaseMs: LEASE_MS,
        heartbeatMs: 333,
        leaseExpiresAt: expect.any(Number),
        buckets: 16,
        unrenewed: []
      })
      expect(field<string>(answer, "incarnation")).not.toBe("")
      // On Redis the time is the registry's, estimated from samples: close to this process's.
      expect(field<number>(answer, "leaseExpiresAt")).toBeGreaterThanOrEqual(before + LEASE_MS - CLOCK_ESTIMATE_MS)
      expect(field<number>(answer, "leaseExpiresAt")).toBeLessThanOrEqual(after + LEASE_MS + CLOCK_ESTIMATE_MS)

      const again = await register(pb, { worker: "w1", advertiseUrl: urlOf("w1"), namespaces: ["/threads"], headroom: 3 })
      expect(field<string>(again, "incarnation")).not.toBe(field<string>(answer, "incarnation"))
    })

    it("heartbeat renews the lease; a wrong, an earlier or an unknown incarnation gets 410 lease lost", async () => {
      const first = await register(pb, { worker: "w1", advertiseUrl: urlOf("w1"), namespaces: ["/threads"], headroom: 3 })
      const incarnation = field<string>(first, "incarnation")
      const before = Date.now()
      const renewed = await heartbeat(pb, "w1", { incarnation, headroom: 4 })
      const after = Date.now()
      expectJson(renewed, 200, { leaseExpiresAt: expect.any(Number), windDown: [], unrenewed: [] })
      // The registry's time, estimated from samples on Redis, as for register above.
      expect(field<number>(renewed, "leaseExpiresAt")).toBeGreaterThanOrEqual(before + LEASE_MS - CLOCK_ESTIMATE_MS)
      expect(field<number>(renewed, "leaseExpiresAt")).toBeLessThanOrEqual(after + LEASE_MS + CLOCK_ESTIMATE_MS)

      expectJson(await heartbeat(pb, "w1", { incarnation: `${incarnation}x`, headroom: 4 }), 410, { error: "lease lost" })
      expectJson(await heartbeat(pb, "nobody", { incarnation, headroom: 4 }), 410, { error: "lease lost" })

      const second = await register(pb, { worker: "w1", advertiseUrl: urlOf("w1"), namespaces: ["/threads"], headroom: 3 })
      expectJson(await heartbeat(pb, "w1", { incarnation, headroom: 4 }), 410, { error: "lease lost" })
      expect((await heartbeat(pb, "w1", { incarnation: field<string>(second, "incarnation"), headroom: 4 })).status).toBe(200)
    })

    it("GET /registry/workers lists every worker with its namespaces as strings, headroom and flags", async () => {
      await register(pb, { worker: "w1", advertiseUrl: urlOf("w1"), namespaces: ["/threads"], headroom: 3 })
      const w2 = await register(pb, { worker: "w2", advertiseUrl: `${urlOf("w2")}/base`, namespaces: ["/rooms", "/threads"], headroom: 0, draining: true })
      const renewed = await heartbeat(pb, "w2", { incarnation: field<string>(w2, "incarnation"), headroom: 1.5, draining: true, degraded: true })
      expect(renewed.status).toBe(200)
      const w1 = await register(pb, { worker: "w1", advertiseUrl: urlOf("w1"), namespaces: ["/threads"], headroom: 2.5 })

      const answer = await send(pb, "/registry/workers")
      expect(answer.status).toBe(200)
      expect(answer.headers["content-type"]).toBe(JSON_TYPE)
      expect(Object.keys(answer.json as object)).toEqual(["workers"])
      const listed = [...field<Array<{ worker: string }>>(answer, "workers")].sort((a, b) => (a.worker < b.worker ? -1 : 1))
      expect(listed).toEqual([
        {
          worker: "w1",
          advertiseUrl: urlOf("w1"),
          namespaces: ["/threads"],
          headroom: 2.5,
          leaseExpiresAt: field<number>(w1, "leaseExpiresAt"),
          draining: false,
          degraded: false,
          nacks: 0
        },
        {
          worker: "w2",
          advertiseUrl: `${urlOf("w2")}/base`,
          namespaces: expect.arrayContaining(["/rooms", "/threads"]),
          headroom: 1.5,
          leaseExpiresAt: field<number>(renewed, "leaseExpiresAt"),
          draining: true,
          degraded: true,
          nacks: 0
        }
      ])
      expect((listed[1] as unknown as { namespaces: Array<string> }).namespaces).toHaveLength(2)
    })

    it("DELETE /registry/workers/{worker}?incarnation= answers 204 and the worker is gone", async () => {
      const w1 = await register(pb, { worker: "w1", advertiseUrl: urlOf("w1"), namespaces: ["/threads"], headroom: 3 })
      await register(pb, { worker: "w2", advertiseUrl: urlOf("w2"), namespaces: ["/threads"], headroom: 3 })
      const incarnation = field<string>(w1, "incarnation")
      const answer = await send(pb, `/registry/workers/w1?incarnation=${incarnation}`, { method: "DELETE" })
      expect(answer.status).toBe(204)
      expect(answer.text).toBe("")
      const listed = field<Array<{ worker: string }>>({ json: await workersOf(pb) } as Answer, "workers")
      expect(listed.map((w) => w.worker)).toEqual(["w2"])
      expectJson(await heartbeat(pb, "w1", { incarnation, headroom: 3 }), 410, { error: "lease lost" })
    })

    it("DELETE with a wrong or unknown incarnation answers 204 and leaves the worker registered", async () => {
      const w1 = await register(pb, { worker: "w1", advertiseUrl: urlOf("w1"), namespaces: ["/threads"], headroom: 3 })
      const incarnation = field<string>(w1, "incarnation")
      expect((await send(pb, `/registry/workers/w1?incarnation=${incarnation}x`, { method: "DELETE" })).status).toBe(204)
      expect((await send(pb, `/registry/workers/nobody?incarnation=${incarnation}`, { method: "DELETE" })).status).toBe(204)
      expect((await heartbeat(pb, "w1", { incarnation, headroom: 3 })).status).toBe(200)
      const listed = field<Array<{ worker: string }>>({ json: await workersOf(pb) } as Answer, "workers")
      expect(listed.map((w) => w.worker)).toEqual(["w1"])
    })

    it("names that are valid but special in JavaScript (__proto__, constructor) work like any other", async () => {
      const answer = await register(pb, { worker: "__proto__", advertiseUrl: urlOf("w1"), namespaces: ["/__proto__", "/constructor"], headroom: 1 })
      expect(answer.status, answer.text).toBe(200)
      const incarnation = field<string>(answer, "incarnation")
      const other = await register(pb, { worker: "constructor", advertiseUrl: urlOf("w2"), namespaces: ["/toString"], headroom: 1 })
      expect(other.status, other.text).toBe(200)
      expectJson(await heartbeat(pb, "__proto__", { incarnation, headroom: 2 }), 200, { leaseExpiresAt: expect.any(Number), windDown: [], unrenewed: [] })
      const listed = field<Array<{ worker: string; namespaces: Array<string> }>>({ json: await workersOf(pb) } as Answer, "workers")
      expect(listed.map((w) => [w.worker, [...w.namespaces].sort()]).sort()).toEqual([
        ["__proto__", ["/__proto__", "/constructor"]],
        ["constructor", ["/toString"]]
      ])
      expectJson(await placementOf(pb, "/__proto__", "constructor"), 404, { error: "not placed" })
      expectJson(await send(pb, "/registry/release", { body: { namespace: "/constructor", id: "__proto__", epoch: "1" } }), 409, {
        released: false,
        epoch: null
      })
      expect((await send(pb, `/registry/workers/__proto__?incarnation=${incarnation}`, { method: "DELETE" })).status).toBe(204)
      const after = field<Array<{ worker: string }>>({ json: await workersOf(pb) } as Answer, "workers")
      expect(after.map((w) => w.worker)).toEqual(["constructor"])
    })

    it("release and tag of an id not placed answer 409 with a null epoch; its placement 404 not placed", async () => {
      await register(pb, { worker: "w1", advertiseUrl: urlOf("w1"), namespaces: ["/threads"], headroom: 3 })
      expectJson(await send(pb, "/registry/release", { body: { namespace: "/threads", id: "x", epoch: "1" } }), 409, {
        released: false,
        epoch: null
      })
      expectJson(await send(pb, "/registry/tag", { body: { namespace: "/threads", id: "x", epoch: "1", tag: "t", env: "" } }), 409, {
        tagged: false,
        epoch: null
      })
      expectJson(await placementOf(pb, "/threads", "x"), 404, { error: "not placed" })
      expectJson(await placementOf(pb, "/nowhere", "x"), 404, { error: "not placed" })
    })

    it("an unknown route answers 404 not found; a known route with the wrong method 405", async () => {
      for (const [method, path] of [
        ["GET", "/registry"],
        ["GET", "/registry/"],
        ["GET", "/registry/nope"],
        ["POST", "/registry/workers/w1/nope"],
        ["GET", "/registry/placements/threads"],
        ["GET", "/registry/placements/threads/x/y"],
        ["POST", "/registry/release/x"],
        ["POST", "/registry/workers/w1/heartbeat/x"]
      ] as const) {
        const answer = await send(pb, path, { method })
        expectJson(answer, 404, { error: "not found" })
      }
      for (const [method, path] of [
        ["PUT", "/registry/workers"],
        ["DELETE", "/registry/workers"],
        ["GET", "/registry/release"],
        ["PUT", "/registry/tag"],
        ["GET", "/registry/workers/w1/heartbeat"],
        ["POST", "/registry/workers/w1"],
        ["POST", "/registry/placements/threads/x"]
      ] as const) {
        const answer = await send(pb, path, { method })
        expect({ method, path, status: answer.status }).toEqual({ method, path, status: 405 })
      }
    })

    it("a tag answered {tagged:true} reads back exactly as sent, even a string that is not well-formed UTF-16", async () => {
      const incarnation = await placeOnWorker(pb, "w1", urlOf("w1"), "/threads", "t2")
      expect((await heartbeat(pb, "w1", { incarnation, headroom: 5 })).status).toBe(200)
      const epoch = field<string>(await placementOf(pb, "/threads", "t2"), "epoch")
      // A lone surrogate is a valid JSON string; refusing it as a bad tag (400) would also keep the contract.
      const lone = "\ud800 lone"
      const answer = await send(pb, "/registry/tag", { body: { namespace: "/threads", id: "t2", epoch, tag: lone } })
      if (answer.status === 400) expectBadRequest(answer, "tag")
      else {
        expectJson(answer, 200, { tagged: true })
        expect(field<string>(await placementOf(pb, "/threads", "t2"), "tag")).toBe(lone)
      }
    })

    it("a placement: GET shows it live at a string epoch; tag and release at that epoch; then 404 not placed", async () => {
      const incarnation = await placeOnWorker(pb, "w1", urlOf("w1"), "/threads", "t1")
      expect((await heartbeat(pb, "w1", { incarnation, headroom: 5 })).status).toBe(200)

      const placed = await placementOf(pb, "/threads", "t1")
      expectJson(placed, 200, {
        namespace: "/threads",
        id: "t1",
        env: "",
        worker: "w1",
        advertiseUrl: urlOf("w1"),
        epoch: expect.stringMatching(/^[1-9][0-9]*$/),
        tag: "",
        placedAt: expect.any(Number),
        windDownAt: null,
        live: true
      })
      const epoch = field<string>(placed, "epoch")
      const stale = String(BigInt(epoch) - 1n)

      expectJson(await send(pb, "/registry/tag", { body: { namespace: "/threads", id: "t1", epoch: stale, tag: "old" } }), 409, {
        tagged: false,
        epoch
      })
      expectJson(await send(pb, "/registry/tag", { body: { namespace: "/threads", id: "t1", epoch, tag: "a".repeat(1024) } }), 200, {
        tagged: true
      })
      expectJson(await send(pb, "/registry/tag", { body: { namespace: "/threads", id: "t1", epoch, tag: "room 7 ✓" } }), 200, {
        tagged: true
      })
      const tagged = await placementOf(pb, "/threads", "t1")
      expect(tagged.json).toEqual({ ...(placed.json as object), tag: "room 7 ✓" })

      expectJson(await send(pb, "/registry/release", { body: { namespace: "/threads", id: "t1", epoch: stale } }), 409, {
        released: false,
        epoch
      })
      expectJson(await send(pb, "/registry/release", { body: { namespace: "/threads", id: "t1", epoch, env: "" } }), 200, {
        released: true
      })
      expectJson(await placementOf(pb, "/threads", "t1"), 404, { error: "not placed" })
      expectJson(await send(pb, "/registry/release", { body: { namespace: "/threads", id: "t1", epoch } }), 409, {
        released: false,
        epoch: null
      })

      // The next request places the id again, at a higher epoch.
      expect((await heartbeat(pb, "w1", { incarnation, headroom: 5 })).status).toBe(200)
      expect((await send(pb, "/threads/t1/x", { authorization: null })).status).toBe(200)
      const again = await placementOf(pb, "/threads", "t1")
      expect(BigInt(field<string>(again, "epoch"))).toBeGreaterThan(BigInt(epoch))
    })
  })

  describe("pages of GET /registry/workers (limit, cursor, next, the 1 MiB bound)", () => {
    interface Listed {
      readonly worker: string
      readonly advertiseUrl: string
    }
    interface Page {
      readonly workers: ReadonlyArray<Listed>
      readonly next?: string
      /** The answer's size in bytes. */
      readonly bytes: number
    }
    const MiB = 1024 * 1024
    // Every character a worker id may have, so that the order checked is byte order, not case or locale order.
    const ALPHABET = "-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~"
    const idsOf = (count: number, label: string) =>
      Array.from({ length: count }, (_, i) => `${ALPHABET[(i * 7) % ALPHABET.length]}${label}${i}`)
    const byteOrder = (ids: ReadonlyArray<string>) => [...ids].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))

    /** Registers every id (in parallel, a batch at a time), with a lease long enough for the whole describe. */
    const registerAll = async (pb: TestPinboard, ids: ReadonlyArray<string>, advertiseUrl: string) => {
      for (let i = 0; i < ids.length; i += 50) {
        const answers = await Promise.all(
          ids.slice(i, i + 50).map((worker) => register(pb, { worker, advertiseUrl, namespaces: ["/threads"], headroom: 1 }))
        )
        for (const answer of answers) expect(answer.status, answer.text).toBe(200)
      }
    }

    const page = async (pb: TestPinboard, query: string): Promise<Page> => {
      const answer = await send(pb, `/registry/workers${query}`)
      expect(answer.status, answer.text).toBe(200)
      expect(answer.headers["content-type"]).toBe(JSON_TYPE)
      const json = answer.json as Page
      // Nothing but the documented fields; `next` only when present.
      expect(Object.keys(json)).toEqual(json.next === undefined ? ["workers"] : ["workers", "next"])
      return { ...json, bytes: answer.body.length }
    }

    /** Every page from `first` on, following `next`; `between` runs after each page but the last. */
    const allPages = async (pb: TestPinboard, first: string, limit?: number, between?: (page: Page) => Promise<void>) => {
      const pages: Array<Page> = []
      let query = first
      for (;;) {
        const got = await page(pb, query)
        pages.push(got)
        if (got.next === undefined) return pages
        expect(pages.length, "pages never end").toBeLessThan(100)
        await between?.(got)
        query = `?${limit === undefined ? "" : `limit=${limit}&`}cursor=${encodeURIComponent(got.next)}`
      }
    }
    const idsIn = (pages: ReadonlyArray<Page>) => pages.flatMap((p) => p.workers.map((w) => w.worker))

    describe("600 small workers", () => {
      const IDS = idsOf(600, "-p")
      let pb: TestPinboard
      beforeAll(async () => {
        pb = await start({ leaseMs: 120_000 })
        await registerAll(pb, IDS, "http://127.0.0.1:9/")
      }, scaled(60_000))
      afterAll(async () => {
        await pb.stop()
      })

      it("without parameters: all 600 in byte order of worker id and no next (600 small records are far below 1 MiB)", async () => {
        const whole = await page(pb, "")
        expect(whole.next).toBeUndefined()
        expect(whole.workers.map((w) => w.worker)).toEqual(byteOrder(IDS))
        expect(whole.bytes).toBeLessThan(MiB)
        // HEAD and an unknown parameter answer as GET does.
        expect((await page(pb, "?surprise=1&limit_=x")).workers.map((w) => w.worker)).toEqual(byteOrder(IDS))
        const head = await send(pb, "/registry/workers?limit=2", { method: "HEAD" })
        expect({ status: head.status, text: head.text }).toEqual({ status: 200, text: "" })
      })

      it("limit=250: 250 with next, 250 with next, then 100 without; together the whole list, in order, once each", async () => {
        const whole = await page(pb, "")
        const pages = await allPages(pb, "?limit=250", 250)
        expect(pages.map((p) => [p.workers.length, p.next === undefined])).toEqual([
          [250, false],
          [250, false],
          [100, true]
        ])
        // Each worker's JSON exactly as in the whole list.
        expect(pages.flatMap((p) => p.workers)).toEqual(whole.workers)
        expect(new Set(idsIn(pages)).size).toBe(600)
        // The cursor is opaque, but each page starts after it.
        for (const [i, p] of pages.entries()) if (p.next !== undefined) expect(pages[i + 1]!.workers[0]!.worker > p.next).toBe(true)
      })

      it("limit=1 and limit=1000 are taken; a page of exactly the rest has no next; a cursor after the last worker answers no workers", async () => {
        const ordered = byteOrder(IDS)
        const one = await page(pb, "?limit=1")
        expect(one.workers.map((w) => w.worker)).toEqual([ordered[0]])
        expect(one.next).toBeDefined()
        const rest = await page(pb, `?limit=1000&cursor=${encodeURIComponent(one.next!)}`)
        expect(rest.workers.map((w) => w.worker)).toEqual(ordered.slice(1))
        expect(rest.next).toBeUndefined()
        const exactly = await allPages(pb, "?limit=300", 300)
        expect(exactly.map((p) => p.workers.length)).toEqual([300, 300])
        expect(await page(pb, "?cursor=~~~~")).toEqual({ workers: [], bytes: '{"workers":[]}'.length })
      })

      it("a worker registered between two reads, with an id after the cursor, shows up in a later page; one before it does not", async () => {
        const late = ["~~late", `${byteOrder(IDS)[0]}0`]
        const incarnations = new Map<string, string>()
        try {
          const pages = await allPages(pb, "?limit=250", 250, async (got) => {
            if (incarnations.size > 0) return
            expect(late[0]! > got.next!).toBe(true)
            expect(late[1]! < got.next!).toBe(true)
            for (const worker of late) {
              const answer = await register(pb, { worker, advertiseUrl: "http://127.0.0.1:9/", namespaces: ["/threads"], headroom: 1 })
              expect(answer.status, answer.text).toBe(200)
              incarnations.set(worker, field<string>(answer, "incarnation"))
            }
          })
          const ids = idsIn(pages)
          expect(ids.slice(250)).toContain("~~late")
          expect(ids).not.toContain(late[1])
          expect(ids).toEqual(byteOrder([...IDS, "~~late"]))
        } finally {
          for (const [worker, incarnation] of incarnations) {
            expect((await send(pb, `/registry/workers/${worker}?incarnation=${incarnation}`, { method: "DELETE" })).status).toBe(204)
          }
        }
      })

      it.each([
        ["limit=0", "limit: expected an integer from 1 to 1000"],
        ["limit=1001", "limit: expected an integer from 1 to 1000"],
        ["limit=x", "limit: expected an integer from 1 to 1000"],
        ["limit=1.5", "limit: expected an integer from 1 to 1000"],
        ["limit=", "limit: expected an integer from 1 to 1000"],
        ["limit=-1", "limit: expected an integer from 1 to 1000"],
        ["limit=01", "limit: expected an integer from 1 to 1000"],
        ["limit=%201", "limit: expected an integer from 1 to 1000"],
        ["cursor=a%20b", 'cursor: expected a cursor as answered in "next"'],
        ["cursor=", 'cursor: expected a cursor as answered in "next"'],
        [`cursor=${"a".repeat(129)}`, 'cursor: expected a cursor as answered in "next"'],
        ["cursor=%zz", 'cursor: expected a cursor as answered in "next"'],
        ["limit=10&cursor=a/b", 'cursor: expected a cursor as answered in "next"']
      ])("?%s answers 400 naming the parameter", async (query, error) => {
        expectJson(await send(pb, `/registry/workers?${query}`), 400, { error })
      })
    })

    describe("more than 1 MiB of workers", () => {
      // 420 records of about 3.1 KB, about 1.25 MiB in all: 1 MiB is passed in the second read of
      // 256 from the registry (256 records are about 0.77 MiB), so the cut falls inside a later read.
      // Fewer, larger records than a real fleet's, as each registration costs a few milliseconds.
      const IDS = idsOf(420, "-big")
      const BIG_URL = `http://127.0.0.1:9/${"p".repeat(3000)}`
      let pb: TestPinboard
      beforeAll(async () => {
        pb = await start({ leaseMs: 120_000 })
        await registerAll(pb, IDS, BIG_URL)
      }, scaled(60_000))
      afterAll(async () => {
        await pb.stop()
      })

      it("without limit: the first answer stops at the last whole worker under 1 MiB and gives next; following it gives the rest", async () => {
        const pages = await allPages(pb, "")
        expect(pages.length).toBeGreaterThan(1)
        const [first, second] = pages as [Page, Page]
        expect(first.next).toBeDefined()
        expect(first.workers.length).toBeGreaterThan(256)
        // The bound is strict: an answer never passes 1 MiB. And it is cut at the last record that
        // fits: the next record (plus its comma and the room kept for the longest cursor, 128
        // bytes) would not have.
        expect(first.bytes).toBeLessThanOrEqual(MiB)
        const nextRecord = Buffer.byteLength(JSON.stringify(second.workers[0]))
        expect(first.bytes + 1 + nextRecord + 128).toBeGreaterThan(MiB)
        for (const p of pages) expect(p.bytes).toBeLessThanOrEqual(MiB)
        expect(idsIn(pages)).toEqual(byteOrder(IDS))
        expect(pages.at(-1)!.next).toBeUndefined()
      })

      it("with limit=1000 the 1 MiB bound still holds: fewer than 1000 and next", async () => {
        const first = await page(pb, "?limit=1000")
        expect(first.workers.length).toBeLessThan(420)
        expect(first.next).toBeDefined()
        expect(first.bytes).toBeLessThanOrEqual(MiB)
        const pages = await allPages(pb, "?limit=1000", 1000)
        expect(idsIn(pages)).toEqual(byteOrder(IDS))
      })
    })
  })

  describe("bad input: the documented 4xx, never a 500, and the registry unchanged", () => {
    const WORKER = "w-main"
    const ID = "live-1"
    let pb: TestPinboard
    const live = { incarnation: "", epoch: "" }

    beforeAll(async () => {
      pb = await start()
      live.incarnation = await placeOnWorker(pb, WORKER, urlOf(WORKER), "/threads", ID)
    })
    afterAll(async () => {
      await pb.stop()
    })

    /** Renews the lease (re-placing if a slow case let it lapse), so the placement is live and stable. */
    const ensureLive = async () => {
      const renewed = await heartbeat(pb, WORKER, { incarnation: live.incarnation, headroom: 5 })
      let placed = await placementOf(pb, "/threads", ID)
      if (renewed.status !== 200 || placed.status !== 200 || field<boolean>(placed, "live") !== true) {
        live.incarnation = await placeOnWorker(pb, WORKER, urlOf(WORKER), "/threads", ID)
        placed = await placementOf(pb, "/threads", ID)
      }
      expect(field<boolean>(placed, "live")).toBe(true)
      live.epoch = field<string>(placed, "epoch")
    }

    const snapshot = async () => {
      const placed = await placementOf(pb, "/threads", ID)
      return { workers: await workersOf(pb), placement: { status: placed.status, json: placed.json } }
    }

    interface Case {
      readonly name: string
      readonly path: () => string
      readonly method?: string
      readonly body?: () => unknown
      readonly raw?: () => string
      readonly authorization?: string | null
      /** A 400 naming this field; otherwise `status` and `error`. */
      readonly field?: string
      readonly status?: number
      readonly error?: string
    }

    // Valid bodies that would change the registry if accepted; each case breaks one thing.
    const registerBody = () => ({ worker: WORKER, advertiseUrl: urlOf(WORKER), namespaces: ["/threads"], headroom: 7 })
    const heartbeatBody = () => ({ incarnation: live.incarnation, headroom: 9 })
    const releaseBody = () => ({ namespace: "/threads", id: ID, epoch: live.epoch })
    const tagBody = () => ({ ...releaseBody(), tag: "changed" })
    const heartbeatPath = () => `/registry/workers/${WORKER}/heartbeat`
    const routes = [
      { route: "register", path: () => "/registry/workers", body: registerBody },
      { route: "heartbeat", path: heartbeatPath, body: heartbeatBody },
      { route: "release", path: () => "/registry/release", body: releaseBody },
      { route: "tag", path: () => "/registry/tag", body: tagBody }
    ] as const

    const patched = (body: () => object, patch: Record<string, unknown>) => () => ({ ...body(), ...patch })
    const without = (body: () => object, key: string) => () => {
      const copy: Record<string, unknown> = { ...body() }
      delete copy[key]
      return copy
    }
    /** The body with one value written as raw JSON (e.g. `1e999`, which JSON.parse reads as Infinity). */
    const rawValue = (body: () => object, key: string, json: string) => () =>
      JSON.stringify({ ...body(), [key]: "@@" }).replace('"@@"', json)

    const long128 = "a".repeat(128)
    const badTypes: Record<(typeof routes)[number]["route"], Record<string, ReadonlyArray<unknown>>> = {
      register: {
        worker: [5, null, ["w"]],
        advertiseUrl: [5, { url: "http://x" }],
        namespaces: ["/threads", 5, {}],
        headroom: ["5", true, null, [1]],
        draining: ["yes", 1],
        epoch: [5, true]
      },
      heartbeat: { incarnation: [5, null], headroom: ["1", false], draining: ["no", 0], degraded: [1, "true"] },
      release: { namespace: [5, null], id: [5, ["x"]], epoch: [5, null], env: [5, false] },
      tag: { namespace: [5], id: [5], epoch: [5], env: [5], tag: [5, null, ["x"], { t: 1 }] }
    }
    const required: Record<(typeof routes)[number]["route"], ReadonlyArray<string>> = {
      register: ["worker", "advertiseUrl", "namespaces", "headroom"],
      heartbeat: ["incarnation", "headroom"],
      release: ["namespace", "id", "epoch"],
      tag: ["namespace", "id", "epoch", "tag"]
    }
    const optional: Record<(typeof routes)[number]["route"], ReadonlyArray<string>> = {
      register: ["draining", "epoch"],
      heartbeat: ["draining", "degraded"],
      release: ["env"],
      tag: ["env"]
    }

    const cases: Array<Case> = []
    for (const { route, path, body } of routes) {
      for (const raw of ['{"worker":', "", "{'a':1}", "[]", '[{"a":1}]', '"x"', "null", "5", "true"]) {
        cases.push({ name: `${route}: body ${JSON.stringify(raw)}`, path, raw: () => raw, field: "body" })
      }
      for (const [key, values] of Object.entries(badTypes[route])) {
        for (const value of values) {
          cases.push({ name: `${route}: ${key} = ${JSON.stringify(value)}`, path, body: patched(body, { [key]: value }), field: key })
        }
      }
      for (const key of required[route]) {
        cases.push({ name: `${route}: ${key} missing`, path, body: without(body, key), field: key })
      }
      for (const key of optional[route]) {
        cases.push({ name: `${route}: ${key} = null (optional fields are absent or of their type)`, path, body: patched(body, { [key]: null }), field: key })
      }
      cases.push({ name: `${route}: an unknown field`, path, body: patched(body, { surprise: 1 }), field: "surprise" })
      cases.push({ name: `${route}: an unknown field "__proto__"`, path, raw: () => JSON.stringify(body()).replace("{", '{"__proto__":{"x":1},'), field: "__proto__" })
    }

    const registerCase = (name: string, patch: Record<string, unknown>, fieldName: string): Case => ({
      name: `register: ${name}`,
      path: () => "/registry/workers",
      body: patched(registerBody, patch),
      field: fieldName
    })
    cases.push(
      registerCase("worker of 129 characters", { worker: `${long128}a` }, "worker"),
      registerCase("worker with a space", { worker: "w main" }, "worker"),
      registerCase("worker empty", { worker: "" }, "worker"),
      registerCase("namespace of 129 characters after /", { namespaces: [`/${long128}a`] }, "namespaces"),
      registerCase("namespace without the leading /", { namespaces: ["threads"] }, "namespaces"),
      registerCase("second namespace bad", { namespaces: ["/threads", "/"] }, "namespaces"),
      registerCase("headroom -1", { headroom: -1 }, "headroom"),
      registerCase("headroom -0.5", { headroom: -0.5 }, "headroom"),
      registerCase("epoch abc", { epoch: "abc" }, "epoch"),
      registerCase("epoch -1", { epoch: "-1" }, "epoch"),
      registerCase("epoch 1.5", { epoch: "1.5" }, "epoch"),
      { name: "register: headroom 1e999", path: () => "/registry/workers", raw: rawValue(registerBody, "headroom", "1e999"), field: "headroom" },
      { name: "register: headroom -1e999", path: () => "/registry/workers", raw: rawValue(registerBody, "headroom", "-1e999"), field: "headroom" }
    )
    for (const url of ["ftp://x", "http://x/?q=1", "http://x/#f", "not a url", "/relative", "http://", "mailto:a@b.c", ""]) {
      cases.push(registerCase(`advertiseUrl ${JSON.stringify(url)}`, { advertiseUrl: url }, "advertiseUrl"))
    }

    const heartbeatCase = (name: string, patch: Record<string, unknown>, fieldName: string): Case => ({
      name: `heartbeat: ${name}`,
      path: heartbeatPath,
      body: patched(heartbeatBody, patch),
      field: fieldName
    })
    cases.push(
      heartbeatCase("headroom -1", { headroom: -1 }, "headroom"),
      heartbeatCase("incarnation with a space", { incarnation: "a b" }, "incarnation"),
      { name: "heartbeat: headroom 1e999", path: heartbeatPath, raw: rawValue(heartbeatBody, "headroom", "1e999"), field: "headroom" },
      { name: "heartbeat: worker of 129 characters in the path", path: () => `/registry/workers/${long128}a/heartbeat`, body: heartbeatBody, field: "worker" },
      { name: "heartbeat: worker with a bad character in the path", path: () => `/registry/workers/w%20main/heartbeat`, body: heartbeatBody, field: "worker" }
    )

    for (const { route, path, body } of routes.slice(2)) {
      const casCase = (name: string, patch: Record<string, unknown>, fieldName: string): Case => ({
        name: `${route}: ${name}`,
        path,
        body: patched(body, patch),
        field: fieldName
      })
      cases.push(
        casCase("namespace of 129 characters after /", { namespace: `/${long128}a` }, "namespace"),
        casCase("namespace without the leading /", { namespace: "threads" }, "namespace"),
        casCase("id of 257 characters", { id: "a".repeat(257) }, "id"),
        casCase("id empty", { id: "" }, "id"),
        casCase("id with a slash", { id: "a/b" }, "id"),
        casCase('epoch "abc"', { epoch: "abc" }, "epoch"),
        casCase('epoch "-1"', { epoch: "-1" }, "epoch"),
        casCase('epoch ""', { epoch: "" }, "epoch"),
        casCase('epoch " 1"', { epoch: " 1" }, "epoch"),
        casCase("env with a space", { env: "a b" }, "env")
      )
    }
    cases.push(
      { name: "tag: 1025 bytes", path: () => "/registry/tag", body: patched(tagBody, { tag: "a".repeat(1025) }), field: "tag" },
      { name: "tag: 342 three-byte characters (1026 bytes)", path: () => "/registry/tag", body: patched(tagBody, { tag: "€".repeat(342) }), field: "tag" }
    )

    cases.push(
      { name: "placements: namespace of 129 characters", path: () => `/registry/placements/${long128}a/${ID}`, field: "namespace" },
      { name: "placements: id of 257 characters", path: () => `/registry/placements/threads/${"a".repeat(257)}`, field: "id" },
      { name: "placements: id with a bad character", path: () => `/registry/placements/threads/a%20b`, field: "id" },
      { name: "placements: env with a bad character", path: () => `/registry/placements/threads/${ID}?env=a%20b`, field: "env" },
      { name: "deregister: no incarnation", method: "DELETE", path: () => `/registry/workers/${WORKER}`, field: "incarnation" },
      {
        name: "deregister: worker of 129 characters",
        method: "DELETE",
        path: () => `/registry/workers/${long128}a?incarnation=${live.incarnation}`,
        field: "worker"
      }
    )

    const unauthorized = { status: 401, error: "invalid deployment token" }
    const badTokens: ReadonlyArray<[string, string | null]> = [
      ["no Authorization", null],
      ["a wrong token of the same length", "Bearer test-tokex"],
      ["a longer token", "Bearer test-token-and-more"],
      ["a shorter token", "Bearer test"],
      ["an empty token", "Bearer "],
      ["the Basic scheme", `Basic ${Buffer.from(`pinboard:${TOKEN}`).toString("base64")}`],
      ["the token without a scheme", TOKEN],
      ["Basic with the bare token", `Basic ${TOKEN}`]
    ]
    for (const [name, authorization] of badTokens) {
      cases.push(
        { name: `GET workers with ${name}`, path: () => "/registry/workers", authorization, ...unauthorized },
        { name: `register with ${name}`, path: () => "/registry/workers", body: registerBody, authorization, ...unauthorized },
        { name: `heartbeat with ${name}`, path: heartbeatPath, body: heartbeatBody, authorization, ...unauthorized },
        { name: `release with ${name}`, path: () => "/registry/release", body: releaseBody, authorization, ...unauthorized },
        { name: `tag with ${name}`, path: () => "/registry/tag", body: tagBody, authorization, ...unauthorized },
        { name: `placement with ${name}`, path: () => `/registry/placements/threads/${ID}`, authorization, ...unauthorized },
        {
          name: `deregister with ${name}`,
          method: "DELETE",
          path: () => `/registry/workers/${WORKER}?incarnation=${live.incarnation}`,
          authorization,
          ...unauthorized
        }
      )
    }

    const MiB = 1024 * 1024
    /** A release body padded with an unknown field to exactly `bytes` bytes. */
    const releaseBodyOfSize = (bytes: number) => {
      const body = JSON.stringify({ ...releaseBody(), pad: "" })
      return body.replace('"pad":""', `"pad":"${"a".repeat(bytes - body.length)}"`)
    }
    cases.push(
      {
        name: "register: a 1 MiB body with Content-Length",
        path: () => "/registry/workers",
        raw: () => JSON.stringify({ ...registerBody(), pad: "a".repeat(MiB) }),
        status: 413,
        error: "body too large"
      },
      {
        name: "release: exactly 64 KiB is read (and its unknown field refused)",
        path: () => "/registry/release",
        raw: () => releaseBodyOfSize(64 * 1024),
        field: "pad"
      },
      {
        name: "release: 64 KiB + 1 byte",
        path: () => "/registry/release",
        raw: () => releaseBodyOfSize(64 * 1024 + 1),
        status: 413,
        error: "body too large"
      }
    )

    it.each(cases)("$name", async (c) => {
      await ensureLive()
      const before = await snapshot()
      const answer = await send(pb, c.path(), {
        ...(c.method === undefined ? {} : { method: c.method }),
        ...(c.raw !== undefined ? { raw: c.raw() } : c.body !== undefined ? { raw: JSON.stringify(c.body()) } : {}),
        ...(c.authorization === undefined ? {} : { authorization: c.authorization })
      })
      if (c.field !== undefined) expectBadRequest(answer, c.field)
      else expectJson(answer, c.status!, { error: c.error })
      expect(await snapshot()).toEqual(before)
    })

    it.each([
      ["register", "/registry/workers"],
      ["heartbeat", `/registry/workers/${WORKER}/heartbeat`],
      ["tag", "/registry/tag"]
    ])("%s: a 1 MiB chunked body (no Content-Length) answers 413 body too large", async (_, path) => {
      await ensureLive()
      const before = await snapshot()
      const answer = await sendChunked(pb, path, 1024 * 1024)
      expectJson(answer, 413, { error: "body too large" })
      expect(await snapshot()).toEqual(before)
    })
  })

  describe("hostname-aware mode (docs/registry-api.md, docs/proxy.md 'Hostname-aware mode')", () => {
    const docs = (hostname: string, env: string) => ({ namespace: "/docs", hostname, env })

    it("registrations name {namespace, hostname, env}; the hostname is kept lowercased; workers list them so", async () => {
      const pb = await start({ hostnameAware: true })
      try {
        const body = { worker: "w1", advertiseUrl: urlOf("w1"), namespaces: [docs("A.Example", "prod"), docs("a.example", "prod")], headroom: 1 }
        expect((await register(pb, body)).status).toBe(200)
        const listed = await send(pb, "/registry/workers")
        expect((listed.json as { workers: Array<{ namespaces: unknown }> }).workers[0]!.namespaces).toEqual([docs("a.example", "prod")])
      } finally {
        await pb.stop()
      }
    })

    it("another env for a bound pair: 409 without a higher epoch, accepted with one", async () => {
      const pb = await start({ hostnameAware: true })
      try {
        const as = (worker: string, env: string, epoch: string) => ({ worker, advertiseUrl: urlOf(worker), namespaces: [docs("a.example", env)], headroom: 1, epoch })
        expect((await register(pb, as("w1", "prod", "3"))).status).toBe(200)
        expectJson(await register(pb, as("w2", "staging", "3")), 409, { error: "hostname binding held by another env" })
        expect((await register(pb, as("w2", "prod", "1"))).status).toBe(200)
        expect((await register(pb, as("w2", "staging", "4"))).status).toBe(200)
      } finally {
        await pb.stop()
      }
    })

    it("plain namespace strings, a hostname with a port, a missing env: 400 naming the entry", async () => {
      const pb = await start({ hostnameAware: true })
      try {
        const base = { worker: "w1", advertiseUrl: urlOf("w1"), headroom: 1 }
        expectJson(await register(pb, { ...base, namespaces: ["/docs"] }), 400, { error: 'namespaces[0]: expected an object {"namespace","hostname","env"}' })
        expectJson(await register(pb, { ...base, namespaces: [docs("a.example:8080", "prod")] }), 400, {
          error: "namespaces[0].hostname: expected a hostname: 1-253 characters of [A-Za-z0-9.-], without a port"
        })
        expectJson(await register(pb, { ...base, namespaces: [{ namespace: "/docs", hostname: "a.example" }] }), 400, { error: "namespaces[0].env: is required" })
      } finally {
        await pb.stop()
      }
    })
  })

  describe("probes", () => {
    it("GET and HEAD /healthz answer 200; /readyz 200 while the registry answers", async () => {
      const pb = await start()
      try {
        expect((await send(pb, "/healthz", { authorization: null })).status).toBe(200)
        const head = await send(pb, "/healthz", { method: "HEAD", authorization: null })
        expect(head.status).toBe(200)
        expect(head.text).toBe("")
        expect((await send(pb, "/readyz", { authorization: null })).status).toBe(200)
        expect((await send(pb, "/readyz", { method: "HEAD", authorization: null })).status).toBe(200)
        expect((await register(pb, { worker: "w1", advertiseUrl: urlOf("w1"), namespaces: ["/threads"], headroom: 1 })).status).toBe(200)
        expect((await send(pb, "/readyz", { authorization: null })).status).toBe(200)
      } finally {
        await pb.stop()
      }
    })
  })
})

describe("Redis outage", () => {
  const UNAVAILABLE = { error: "registry unavailable, retry" }
  // The registry's 1 s timeout, and slack for the machine.
  const OUTAGE_ANSWER_MS = 1000 + scaled(1500)

  it("turns /readyz 503 and registry calls 503 with Retry-After: 1 quickly, then resumes on a new redis-server on the same port", async () => {
    const worker = await startWorker("w1")
    let redis = await startRedisServer()
    const pb = await startPinboard({ leaseMs: LEASE_MS, redis: redisSection({ url: redis.url, prefix: "pb" }) })
    try {
      const body = { worker: "w1", advertiseUrl: worker.url, namespaces: ["/threads"], headroom: 1 }
      const registered = await register(pb, body)
      expect(registered.status).toBe(200)
      const incarnation = field<string>(registered, "incarnation")
      expect((await send(pb, "/readyz", { authorization: null })).status).toBe(200)

      await redis.stop()
      const stopped = performance.now()

      await poll("/readyz turning 503", OUTAGE_ANSWER_MS, async () => {
        const answer = await send(pb, "/readyz", { authorization: null })
        expect(answer.elapsedMs).toBeLessThan(OUTAGE_ANSWER_MS)
        return answer.status === 503 ? answer : undefined
      })
      expect(performance.now() - stopped).toBeLessThan(OUTAGE_ANSWER_MS)
      expect((await send(pb, "/healthz", { authorization: null })).status).toBe(200)

      const calls: ReadonlyArray<[string, string, Send]> = [
        ["register", "/registry/workers", { body }],
        ["heartbeat", "/registry/workers/w1/heartbeat", { body: { incarnation, headroom: 1 } }],
        ["workers", "/registry/workers", {}],
        ["release", "/registry/release", { body: { namespace: "/threads", id: "x", epoch: "1" } }],
        ["tag", "/registry/tag", { body: { namespace: "/threads", id: "x", epoch: "1", tag: "t" } }],
        ["placement", "/registry/placements/threads/x", {}],
        ["deregister", `/registry/workers/w1?incarnation=${incarnation}`, { method: "DELETE" }]
      ]
      for (const [name, path, options] of calls) {
        const answer = await send(pb, path, options)
        expect({ name, status: answer.status, body: answer.json }).toEqual({ name, status: 503, body: UNAVAILABLE })
        expect(answer.headers["content-type"]).toBe(JSON_TYPE)
        expect(answer.headers["retry-after"]).toBe("1")
        expect(answer.elapsedMs).toBeLessThan(OUTAGE_ANSWER_MS)
      }
      const instance = await send(pb, "/threads/x/y", { authorization: null })
      expect({ status: instance.status, body: instance.json }).toEqual({ status: 503, body: UNAVAILABLE })
      expect(instance.headers["retry-after"]).toBe("1")

      redis = await startRedisServer(redis.port)
      // The new server is empty: a wiped bucket has no record of the worker, so its lease is lost.
      const lost = await poll("heartbeat after redis-server came back", 5000, async () => {
        const answer = await heartbeat(pb, "w1", { incarnation, headroom: 1 })
        expect(answer.elapsedMs).toBeLessThan(OUTAGE_ANSWER_MS)
        return answer.status === 503 ? undefined : answer
      })
      expectJson(lost, 410, { error: "lease lost" })
      const resumed = await poll("register after redis-server came back", 5000, async () => {
        const answer = await register(pb, body)
        expect(answer.elapsedMs).toBeLessThan(OUTAGE_ANSWER_MS)
        if (answer.status === 200) return answer
        expect(answer.json).toEqual(UNAVAILABLE)
        return undefined
      })
      expect(resumed.json).toMatchObject({ worker: "w1", leaseMs: LEASE_MS })
      await poll("/readyz 200 again", 5000, async () =>
        (await send(pb, "/readyz", { authorization: null })).status === 200 ? true : undefined
      )
      const listed = await send(pb, "/registry/workers")
      expect(field<Array<{ worker: string }>>(listed, "workers").map((w) => w.worker)).toEqual(["w1"])
    } finally {
      await pb.stop()
      await redis.stop()
      await worker.close()
    }
  })

  it("a redis-server that stops answering (SIGSTOP) gives 503s within the 1 s registry timeout, never a hang", async () => {
    const worker = await startWorker("w1")
    const redis = await startRedisServer()
    const pb = await startPinboard({ leaseMs: LEASE_MS, redis: redisSection({ url: redis.url, prefix: "pb" }) })
    let paused = false
    try {
      const body = { worker: "w1", advertiseUrl: worker.url, namespaces: ["/threads"], headroom: 1 }
      const registered = await register(pb, body)
      expect(registered.status).toBe(200)
      const incarnation = field<string>(registered, "incarnation")

      process.kill(redis.pid, "SIGSTOP")
      paused = true
      const [ready, registering, renewing, listing] = await Promise.all([
        send(pb, "/readyz", { authorization: null }),
        register(pb, body),
        heartbeat(pb, "w1", { incarnation, headroom: 1 }),
        send(pb, "/registry/workers")
      ])
      expect(ready.status).toBe(503)
      expect(ready.elapsedMs).toBeLessThan(OUTAGE_ANSWER_MS)
      for (const answer of [registering, renewing, listing]) {
        expectJson(answer, 503, UNAVAILABLE)
        expect(answer.headers["retry-after"]).toBe("1")
        expect(answer.elapsedMs).toBeLessThan(OUTAGE_ANSWER_MS)
      }

      process.kill(redis.pid, "SIGCONT")
      paused = false
      const renewed = await poll("heartbeat after SIGCONT", 5000, async () => {
        const answer = await heartbeat(pb, "w1", { incarnation, headroom: 1 })
        return answer.status === 503 ? undefined : answer
      })
      // The stalled register may have run once the server woke up; either way the worker is known.
      expect([200, 410]).toContain(renewed.status)
      await poll("/readyz 200 after SIGCONT", 5000, async () =>
        (await send(pb, "/readyz", { authorization: null })).status === 200 ? true : undefined
      )
    } finally {
      if (paused) process.kill(redis.pid, "SIGCONT")
      await pb.stop()
      await redis.stop()
      await worker.close()
    }
  })
})
