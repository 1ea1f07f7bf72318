// The data plane end to end, as docs/proxy.md describes it
// ("Forwarding", "Retries", "Limits"): the built Pinboard on a real redis-server and on a
// local Redis Cluster of three shards (and a smaller set on the embedded registry), real
// fixture worker processes, real HTTP clients.
// Pinboard-Attestation belongs to the auth work and is not checked here.
import { createHash, randomBytes } from "node:crypto"
import http from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  eventually,
  Fleet,
  LEASE_MS,
  nacksOf,
  placementOf,
  STANDARD_CONFIG,
  uid,
  waitForColdStart,
  type StandardFleet,
  useStandardFleet
} from "../support/Fleet.js"
import {
  headerNames,
  headerTokens,
  headerValues,
  parseResponse,
  rawExchange,
  rawRequestHead,
  request,
  type Answer
} from "../support/Wire.js"
import type { Echo } from "../support/Echo.js"
import { freePort } from "../support/Processes.js"
import { poll, scaled, within } from "../support/Time.js"

const TEXT = "text/plain; charset=utf-8"
const JSON_TYPE = "application/json"
const ORIGIN = "https://app.example"


const echoOf = (answer: Answer | { readonly status: number; readonly body: Buffer }): Echo => {
  if (answer.status !== 200) throw new Error(`expected the worker's 200, got ${answer.status}: ${answer.body.toString()}`)
  return JSON.parse(answer.body.toString()) as Echo
}

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex")

/** A response Pinboard wrote itself: exact status, content type and body. */
const expectOwn = (answer: Answer, status: number, contentType: string, body: string) => {
  expect({ status: answer.status, contentType: answer.headers["content-type"], body: answer.text }).toEqual({
    status,
    contentType,
    body
  })
}

const expectRetryAfterSeconds = (answer: Answer, max: number) => {
  const values = headerValues(answer.rawHeaders, "retry-after")
  expect(values).toHaveLength(1)
  expect(values[0]).toMatch(/^[1-9][0-9]*$/)
  expect(Number(values[0])).toBeLessThanOrEqual(max)
}

/** Raw request on its own connection, answer parsed; the request asks to close afterwards. */
const raw = async (port: number, method: string, target: string, headers: ReadonlyArray<[string, string]>, body = "") => {
  const exchange = await rawExchange(port, rawRequestHead(method, target, headers) + body)
  return parseResponse(exchange.bytes)
}

describe.each(["redis", "cluster", "embedded"] as const)("data plane (%s registry)", (registry) => {
  const standard = useStandardFleet(registry)
  const fullIt = standard.fullIt
  const full = registry !== "embedded"
  let f: StandardFleet
  beforeAll(() => {
    f = standard.get()
  })

  // ---- forwarding and request headers ------------------------------------------------------

  describe("request headers", () => {
    it("forwards to the placed worker with Pinboard-Epoch, the placement's epoch as a decimal string", async () => {
      const id = uid()
      const first = echoOf(await request(f.pinboard, `/threads/${id}/echo`))
      expect(first.worker).toBe(f.a.id)
      const epochs = headerValues(first.rawHeaders, "pinboard-epoch")
      expect(epochs).toHaveLength(1)
      expect(epochs[0]).toMatch(/^(0|[1-9][0-9]*)$/)
      const row = await placementOf(f.pinboard, "/threads", id)
      expect(row).toMatchObject({ worker: f.a.id, epoch: epochs[0], live: true })

      const again = echoOf(await request(f.pinboard, `/threads/${id}/echo`))
      expect(again.worker).toBe(f.a.id)
      expect(headerValues(again.rawHeaders, "pinboard-epoch")).toEqual(epochs)
    })

    it("forwards Authorization unchanged", async () => {
      const echo = echoOf(
        await request(f.pinboard, `/threads/${uid()}/echo`, { headers: { authorization: "Bearer user-token.with.dots" } })
      )
      expect(headerValues(echo.rawHeaders, "authorization")).toEqual(["Bearer user-token.with.dots"])
    })

    it("never forwards Host: the worker sees its own host", async () => {
      const answer = await raw(f.pinboard.port, "GET", `/threads/${uid()}/echo`, [["Host", "client.example:1234"]])
      const echo = echoOf(answer)
      expect(headerValues(echo.rawHeaders, "host")).toEqual([`127.0.0.1:${f.a.port}`])
      expect(JSON.stringify(echo.rawHeaders)).not.toContain("client.example")
    })

    it("strips every Pinboard-* request header, a client's Pinboard-Epoch included", async () => {
      const id = uid()
      const echo = echoOf(
        await request(f.pinboard, `/threads/${id}/echo`, {
          headers: [
            ["Pinboard-Foo", "from-client"],
            ["PINBOARD-BAR", "from-client"],
            ["pinboard-epoch", "1"]
          ]
        })
      )
      const names = headerNames(echo.rawHeaders).filter((name) => name.startsWith("pinboard-"))
      // Pinboard's own additions only (Pinboard-Attestation arrives with the auth work).
      expect(names.filter((name) => name !== "pinboard-attestation")).toEqual(["pinboard-epoch"])
      expect(JSON.stringify(echo.rawHeaders)).not.toContain("from-client")
      expect(headerValues(echo.rawHeaders, "pinboard-epoch")).toEqual([(await placementOf(f.pinboard, "/threads", id))!.epoch])
    })

    it("replaces X-Forwarded-For with the peer address Pinboard observed", async () => {
      const answer = await raw(f.pinboard.port, "GET", `/threads/${uid()}/echo`, [
        ["Host", "client.example"],
        ["X-Forwarded-For", "10.0.0.1, 10.0.0.2"],
        ["X-Forwarded-For", "10.0.0.3"]
      ])
      expect(headerValues(echoOf(answer).rawHeaders, "x-forwarded-for")).toEqual(["127.0.0.1"])
    })

    it("strips hop-by-hop request headers, names listed in Connection included", async () => {
      const answer = await raw(f.pinboard.port, "GET", `/threads/${uid()}/echo`, [
        ["Host", "client.example"],
        ["Connection", "close, X-Hop-One, x-hop-two"],
        ["X-Hop-One", "sentinel-1"],
        ["X-Hop-Two", "sentinel-2"],
        ["Keep-Alive", "sentinel-keep-alive"],
        ["TE", "sentinel-te"],
        ["Trailer", "X-Sentinel-Trailer"],
        ["Upgrade", "sentinel-proto/1"],
        ["Proxy-Authorization", "Basic sentinel"],
        ["Proxy-Connection", "sentinel-proxy-connection"],
        ["Proxy-Foo", "sentinel-proxy"],
        ["X-Kept", "kept"]
      ])
      const echo = echoOf(answer)
      const names = headerNames(echo.rawHeaders)
      for (const name of ["x-hop-one", "x-hop-two", "te", "trailer", "upgrade"]) expect(names).not.toContain(name)
      expect(names.filter((name) => name.startsWith("proxy-"))).toEqual([])
      // Pinboard's own hop may send its own Connection / Keep-Alive; never the client's.
      expect(JSON.stringify(echo.rawHeaders).toLowerCase()).not.toContain("sentinel")
      expect(headerTokens(echo.rawHeaders, "connection")).not.toContain("x-hop-one")
      expect(headerValues(echo.rawHeaders, "x-kept")).toEqual(["kept"])
    })

    fullIt("forwards everything else: methods, custom headers, cookies, repeated headers", async () => {
      for (const method of ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"]) {
        const echo = echoOf(
          await request(f.pinboard, `/threads/${uid()}/echo`, {
            method,
            headers: [
              ["Accept", "application/x-custom"],
              ["Content-Type", "text/x-custom"],
              ["Cookie", "session=abc; theme=dark"],
              ["User-Agent", "pinboard-e2e/1"],
              ["X-Forwarded-Proto", "https"],
              ["X-Custom", "one"],
              ["X-Dup", "1"],
              ["X-Dup", "2"]
            ],
            ...(method === "GET" ? {} : { body: "payload" })
          })
        )
        expect(echo.method).toBe(method)
        expect(echo.headers).toMatchObject({
          accept: "application/x-custom",
          "content-type": "text/x-custom",
          cookie: "session=abc; theme=dark",
          "user-agent": "pinboard-e2e/1",
          "x-forwarded-proto": "https",
          "x-custom": "one",
          "x-dup": "1, 2"
        })
        if (method !== "GET") expect(echo.bodySha256).toBe(sha256(Buffer.from("payload")))
      }
      const head = await request(f.pinboard, `/threads/${uid()}/echo`, { method: "HEAD" })
      expect(head.status).toBe(200)
      expect(head.body.length).toBe(0)
    })
  })

  // ---- paths ---------------------------------------------------------------------------------

  describe("paths", () => {
    it("forwards the raw path and query byte for byte", async () => {
      const id = uid()
      for (const target of [
        `/threads/${id}/a%2Fb/../c?x=%20&y`,
        `/threads/${id}/%7E%41/./x;p=1//y?a=1&a=2&b=%zz&c=a+b`,
        `/threads/${id}`,
        `/threads/${id}?only=query`,
        `/threads/${id}/`
      ]) {
        expect(echoOf(await request(f.pinboard, target)).url).toBe(target)
      }
    })

    fullIt("takes ids of 1 to 256 characters of [A-Za-z0-9._~-], case-sensitive namespaces", async () => {
      for (const id of ["x", "A-z_0.9~", "..", "a".repeat(256)]) {
        expect(echoOf(await request(f.pinboard, `/threads/${id}/echo`)).url).toBe(`/threads/${id}/echo`)
      }
      expectOwn(await request(f.pinboard, `/THREADS/${uid()}/echo`), 404, JSON_TYPE, '{"error":"unknown namespace"}')
    })

    fullIt("puts the advertiseUrl's path before the forwarded path", async () => {
      const worker = await f.fleet.worker(f.pinboard, { id: uid("wp"), namespaces: ["/prefixed"], prefix: "/base" })
      try {
        const id = uid()
        const echo = echoOf(await request(f.pinboard, `/prefixed/${id}/x%2F?y=1`))
        expect(echo).toMatchObject({ worker: worker.id, url: `/base/prefixed/${id}/x%2F?y=1` })
      } finally {
        await worker.process.kill()
      }
    })
  })

  // ---- Pinboard's own errors -----------------------------------------------------------------

  describe("errors", () => {
    const BAD_CHARACTERS = full
      ? ["%", "%2F", "!", "@", "$", "&", "'", "(", ")", "*", "+", ",", ";", "=", ":", '"', "<", ">", "\\", "^", "`", "{", "|", "}", "[", "]"]
      : ["%", "%2F", "!", ":", "@"]

    it("400 for an invalid id, as exact text/plain, before the namespace is looked at", async () => {
      const cases: Array<[string, string]> = [
        ["/threads//x", "id must be non-empty"],
        ["/unregistered//x", "id must be non-empty"],
        [`/threads/${"a".repeat(257)}`, "id must be at most 256 characters"],
        [`/threads/${"a".repeat(257)}/rest`, "id must be at most 256 characters"],
        ...BAD_CHARACTERS.map((c): [string, string] => [`/threads/a${c}b/echo`, "id must contain only [A-Za-z0-9._~-]"]),
        ["/unregistered/a%2Fb", "id must contain only [A-Za-z0-9._~-]"]
      ]
      for (const [target, message] of cases) {
        const answer = await raw(f.pinboard.port, "GET", target, [["Host", "client.example"]])
        expect({ target, status: answer.status, type: headerValues(answer.rawHeaders, "content-type"), body: answer.body.toString() }).toEqual({
          target,
          status: 400,
          type: [TEXT],
          body: message
        })
      }
    })

    it('404 {"error":"unknown namespace"} with no id segment or an unregistered namespace', async () => {
      for (const target of ["/threads", "/threads/", "/threads?x=1", "/", "/unregistered", `/unregistered/${uid()}`, `/unregistered/${uid()}/echo?x`]) {
        const answer = await request(f.pinboard, target)
        expect({ target, status: answer.status, type: answer.headers["content-type"], body: answer.text }).toEqual({
          target,
          status: 404,
          type: JSON_TYPE,
          body: '{"error":"unknown namespace"}'
        })
      }
    })

    it('503 {"error":"no live backends for namespace"} with Retry-After when no worker can take it', async () => {
      const gone = `/gone-${uid("ns")}`
      const left = await f.fleet.virtualWorker(f.pinboard, { id: uid("v"), advertiseUrl: f.a.advertiseUrl, namespaces: [gone] })
      await left.deregister()
      const draining = `/draining-${uid("ns")}`
      await f.fleet.virtualWorker(f.pinboard, { id: uid("v"), advertiseUrl: f.a.advertiseUrl, namespaces: [draining], draining: true })
      for (const ns of [gone, draining]) {
        const answer = await request(f.pinboard, `${ns}/${uid()}/echo`)
        expectOwn(answer, 503, JSON_TYPE, '{"error":"no live backends for namespace"}')
        expect(headerValues(answer.rawHeaders, "retry-after")).toEqual(["1"])
      }
    })

    it("502 bad gateway when a new placement's worker is unreachable; the placement is released, so the next request re-places", async () => {
      const ns = `/dead-${uid("ns")}`
      const nobody = await freePort()
      const dead = await f.fleet.virtualWorker(f.pinboard, { id: uid("dead"), advertiseUrl: `http://127.0.0.1:${nobody}`, namespaces: [ns] })
      const id = uid()
      expectOwn(await request(f.pinboard, `${ns}/${id}/echo`), 502, TEXT, "bad gateway")
      expect(await placementOf(f.pinboard, ns, id)).toBeUndefined()

      // A draining worker keeps its placements: only a released one can move to the new worker.
      await dead.setDraining(true)
      const live = await f.fleet.worker(f.pinboard, { id: uid("live"), namespaces: [ns] })
      try {
        expect(echoOf(await request(f.pinboard, `${ns}/${id}/echo`)).worker).toBe(live.id)
        expect(await placementOf(f.pinboard, ns, id)).toMatchObject({ worker: live.id })
      } finally {
        await live.process.kill()
      }
    })

    fullIt("502 bad gateway when the worker fails before sending headers", async () => {
      const id = uid()
      echoOf(await request(f.pinboard, `/threads/${id}/echo`))
      expectOwn(await request(f.pinboard, `/threads/${id}/reset?before=1`), 502, TEXT, "bad gateway")
      expect(echoOf(await request(f.pinboard, `/threads/${id}/echo`)).worker).toBe(f.a.id)
    })

    it("504 upstream timeout when no response headers come within forwards.timeoutMs", async () => {
      const started = performance.now()
      const answer = await request(f.pinboard, `/threads/${uid()}/slow-headers?ms=4000`)
      const elapsed = performance.now() - started
      expectOwn(answer, 504, TEXT, "upstream timeout")
      expect(elapsed).toBeGreaterThan(STANDARD_CONFIG.forwards.timeoutMs - 100)
      expect(elapsed).toBeLessThan(STANDARD_CONFIG.forwards.timeoutMs + scaled(2500))
    })

    it('503 {"error":"registry cold start, retry"} for one lease after a bucket\'s first use, Retry-After the seconds left', async () => {
      // Same registry, a fresh prefix: buckets never used before.
      const pinboard = await f.fleet.pinboard({ ...f.backing, config: STANDARD_CONFIG })
      try {
        const registered = performance.now()
        await f.fleet.virtualWorker(pinboard, { id: uid("v"), advertiseUrl: f.a.advertiseUrl, namespaces: ["/cold"] })
        const answer = await request(pinboard, `/cold/${uid()}/echo`)
        expectOwn(answer, 503, JSON_TYPE, '{"error":"registry cold start, retry"}')
        expectRetryAfterSeconds(answer, Math.ceil(LEASE_MS / 1000))

        // Placements start once the lease has passed, not before.
        const id = uid()
        await poll(
          async () => {
            const next = await request(pinboard, `/cold/${id}/echo`)
            if (next.status === 200) return true
            expectOwn(next, 503, JSON_TYPE, '{"error":"registry cold start, retry"}')
            return false
          },
          { timeoutMs: LEASE_MS + 5000, everyMs: 100, reason: "the first placement after the cold start" }
        )
        expect(performance.now() - registered).toBeGreaterThanOrEqual(LEASE_MS - 100)
      } finally {
        await pinboard.stop()
      }
    })

    fullIt("applies the CORS rule to Pinboard's own errors", async () => {
      const gone = `/gone-${uid("ns")}`
      await (await f.fleet.virtualWorker(f.pinboard, { id: uid("v"), advertiseUrl: f.a.advertiseUrl, namespaces: [gone] })).deregister()
      const dead = `/dead-${uid("ns")}`
      await f.fleet.virtualWorker(f.pinboard, { id: uid("dead"), advertiseUrl: `http://127.0.0.1:${await freePort()}`, namespaces: [dead] })
      const targets: Array<[string, number]> = [
        ["/threads//x", 400],
        [`/unregistered/${uid()}`, 404],
        [`${gone}/${uid()}`, 503],
        [`${dead}/${uid()}`, 502],
        [`/threads/${uid()}/slow-headers?ms=4000`, 504]
      ]
      for (const [target, status] of targets) {
        const withOrigin = await request(f.pinboard, target, { headers: { origin: ORIGIN } })
        expect({ target, status: withOrigin.status, acao: headerValues(withOrigin.rawHeaders, "access-control-allow-origin") }).toEqual({
          target,
          status,
          acao: [ORIGIN]
        })
        expect(headerTokens(withOrigin.rawHeaders, "vary")).toEqual(["origin"])
      }
      const without = await request(f.pinboard, `/unregistered/${uid()}`)
      expect(without.status).toBe(404)
      expect(headerNames(without.rawHeaders)).not.toContain("access-control-allow-origin")
      expect(headerTokens(without.rawHeaders, "vary")).not.toContain("origin")
    })
  })

  // ---- responses -------------------------------------------------------------------------------

  describe("responses", () => {
    fullIt("relays the worker's status and headers, a plain 503 without Pinned-Refusal included", async () => {
      for (const status of [201, 204, 404, 500, 503]) {
        const answer = await request(f.pinboard, `/threads/${uid()}/status/${status}`)
        expect(answer.status).toBe(status)
        expect(headerValues(answer.rawHeaders, "x-worker")).toEqual([f.a.id])
        expect(answer.text).toBe("")
      }
    })

    it("strips hop-by-hop, Pinboard-* and Pinned-Refusal response headers and sets X-Accel-Buffering: no", async () => {
      const query = new URLSearchParams()
      for (const h of [
        "Connection:x-custom",
        "x-custom:sentinel-1",
        "Keep-Alive:timeout=99, sentinel",
        "Upgrade:sentinel-proto",
        "Trailer:X-Sentinel-Trailer",
        "Proxy-Authenticate:Basic realm=sentinel",
        "Proxy-Foo:sentinel",
        "Pinboard-Foo:sentinel",
        "Pinboard-Epoch:sentinel-123",
        "Pinned-Refusal:lease-unhealthy",
        "X-Kept:yes"
      ]) {
        query.append("h", h)
      }
      const answer = await raw(f.pinboard.port, "GET", `/threads/${uid()}/headers?${query}`, [["Host", "client.example"]])
      expect(answer.status).toBe(200)
      expect(answer.body.toString()).toBe("headers sent")
      const names = headerNames(answer.rawHeaders)
      for (const name of ["x-custom", "upgrade", "trailer", "pinned-refusal"]) expect(names).not.toContain(name)
      expect(names.filter((name) => name.startsWith("proxy-") || name.startsWith("pinboard-"))).toEqual([])
      expect(JSON.stringify(answer.rawHeaders)).not.toContain("sentinel")
      expect(headerTokens(answer.rawHeaders, "connection")).not.toContain("x-custom")
      expect(headerValues(answer.rawHeaders, "x-kept")).toEqual(["yes"])
      expect(headerValues(answer.rawHeaders, "x-accel-buffering")).toEqual(["no"])
    })

    fullIt("keeps other response headers as sent, repeated Set-Cookie lines apart", async () => {
      const query = new URLSearchParams([
        ["h", "Set-Cookie:a=1; Path=/"],
        ["h", "Set-Cookie:b=2; HttpOnly"],
        ["h", "Cache-Control:no-store"],
        ["h", "X-Accel-Buffering:yes"]
      ])
      const answer = await request(f.pinboard, `/threads/${uid()}/headers?${query}`)
      expect(answer.status).toBe(200)
      expect(headerValues(answer.rawHeaders, "set-cookie")).toEqual(["a=1; Path=/", "b=2; HttpOnly"])
      expect(headerValues(answer.rawHeaders, "cache-control")).toEqual(["no-store"])
      // "Sets X-Accel-Buffering: no": the worker's own value does not survive.
      expect(headerValues(answer.rawHeaders, "x-accel-buffering")).toEqual(["no"])
    })

    it("CORS on a worker response without Access-Control-Allow-Origin: sets it to the Origin and appends Vary: origin", async () => {
      const query = new URLSearchParams([["h", "Vary:accept-encoding"]])
      const answer = await request(f.pinboard, `/threads/${uid()}/headers?${query}`, { headers: { origin: ORIGIN } })
      expect(answer.status).toBe(200)
      expect(headerValues(answer.rawHeaders, "access-control-allow-origin")).toEqual([ORIGIN])
      expect(headerTokens(answer.rawHeaders, "vary")).toEqual(["accept-encoding", "origin"])

      const echo = await request(f.pinboard, `/threads/${uid()}/echo`, { headers: { origin: ORIGIN } })
      expect(headerValues(echo.rawHeaders, "access-control-allow-origin")).toEqual([ORIGIN])
      expect(headerTokens(echo.rawHeaders, "vary")).toEqual(["origin"])
    })

    fullIt("CORS: a worker's own Access-Control-Allow-Origin is kept, and Vary left alone", async () => {
      const query = new URLSearchParams([
        ["h", "Access-Control-Allow-Origin:https://worker.example"],
        ["h", "Vary:accept-encoding"]
      ])
      const answer = await request(f.pinboard, `/threads/${uid()}/headers?${query}`, { headers: { origin: ORIGIN } })
      expect(headerValues(answer.rawHeaders, "access-control-allow-origin")).toEqual(["https://worker.example"])
      expect(headerTokens(answer.rawHeaders, "vary")).toEqual(["accept-encoding"])
    })

    fullIt("CORS: nothing added without an Origin", async () => {
      const query = new URLSearchParams([["h", "Vary:accept-encoding"]])
      const answer = await request(f.pinboard, `/threads/${uid()}/headers?${query}`)
      expect(headerNames(answer.rawHeaders)).not.toContain("access-control-allow-origin")
      expect(headerTokens(answer.rawHeaders, "vary")).toEqual(["accept-encoding"])
    })

    fullIt("relays redirects, never follows them", async () => {
      const answer = await request(f.pinboard, `/threads/${uid()}/redirect?to=${encodeURIComponent("http://127.0.0.1:1/elsewhere?x=1")}`)
      expect(answer.status).toBe(302)
      expect(headerValues(answer.rawHeaders, "location")).toEqual(["http://127.0.0.1:1/elsewhere?x=1"])
      expect(answer.text).toBe("redirecting")
    })

    it("streams the request body: the worker answers before the upload ends, and every byte arrives", async () => {
      const first = randomBytes(64 * 1024)
      const second = randomBytes(1024 * 1024)
      const req = http.request({
        host: "127.0.0.1",
        port: f.pinboard.port,
        method: "POST",
        path: `/threads/${uid()}/upload?early=${first.length}`,
        agent: false,
        headers: { "content-type": "application/octet-stream" }
      })
      req.on("error", () => undefined)
      try {
        req.write(first)
        const res = await within(
          new Promise<http.IncomingMessage>((resolve) => req.once("response", resolve)),
          5000,
          "response headers while the upload was open (is the body streamed?)"
        )
        expect(res.statusCode).toBe(200)
        const lines: Array<string> = []
        let buffered = ""
        let firstLine: () => void = () => undefined
        const firstLineIn = new Promise<void>((resolve) => (firstLine = resolve))
        const done = new Promise<void>((resolve, reject) => {
          res.on("data", (chunk: Buffer) => {
            buffered += chunk.toString()
            let nl: number
            while ((nl = buffered.indexOf("\n")) >= 0) {
              lines.push(buffered.slice(0, nl))
              buffered = buffered.slice(nl + 1)
              firstLine()
            }
          })
          res.on("end", resolve)
          res.on("error", reject)
        })
        await within(firstLineIn, 5000, "the worker's first line while the upload was open")
        expect(JSON.parse(lines[0]!)).toEqual({ early: first.length })
        req.end(second)
        await done
        const echo = JSON.parse(lines[1]!) as Echo
        expect(echo.bodyBytes).toBe(first.length + second.length)
        expect(echo.bodySha256).toBe(sha256(Buffer.concat([first, second])))
      } finally {
        req.destroy()
      }
    })

    fullIt("uploads of several MiB arrive intact, sized and chunked", async () => {
      const body = randomBytes(8 * 1024 * 1024)
      const sized = echoOf(await request(f.pinboard, `/threads/${uid()}/upload`, { method: "POST", body }))
      expect({ bytes: sized.bodyBytes, sha: sized.bodySha256 }).toEqual({ bytes: body.length, sha: sha256(body) })
      expect(sized.headers["content-length"]).toBe(String(body.length))

      const chunked = await new Promise<Answer>((resolve, reject) => {
        const req = http.request({ host: "127.0.0.1", port: f.pinboard.port, method: "POST", path: `/threads/${uid()}/upload`, agent: false })
        req.on("error", reject)
        req.on("response", (res) => {
          const chunks: Array<Buffer> = []
          res.on("data", (c: Buffer) => chunks.push(c))
          res.on("end", () => {
            const all = Buffer.concat(chunks)
            resolve({ status: res.statusCode ?? 0, statusMessage: "", headers: res.headers, rawHeaders: res.rawHeaders, body: all, text: all.toString() })
          })
        })
        for (let i = 0; i < 8; i++) req.write(body.subarray(i * 1024 * 1024, (i + 1) * 1024 * 1024))
        req.end()
      })
      const echo = echoOf(chunked)
      expect({ bytes: echo.bodyBytes, sha: echo.bodySha256 }).toEqual({ bytes: body.length, sha: sha256(body) })
    })

    it("a streamed body longer than forwards.timeoutMs is not cut", async () => {
      const chunks = 6
      const everyMs = 350
      const arrivals: Array<string> = []
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.get(
          { host: "127.0.0.1", port: f.pinboard.port, path: `/threads/${uid()}/stream?chunks=${chunks}&everyMs=${everyMs}`, agent: false },
          (res) => {
            expect(headerValues(res.rawHeaders, "x-accel-buffering")).toEqual(["no"])
            res.on("data", (chunk: Buffer) => arrivals.push(chunk.toString()))
            res.on("end", () => resolve(res.statusCode ?? 0))
            res.on("aborted", () => reject(new Error("stream cut")))
            res.on("error", reject)
          }
        )
        req.on("error", reject)
      })
      expect(status).toBe(200)
      expect(arrivals.join("")).toBe(Array.from({ length: chunks }, (_, i) => `chunk ${i}\n`).join(""))
      const total = (chunks - 1) * everyMs
      expect(total).toBeGreaterThan(STANDARD_CONFIG.forwards.timeoutMs)
    })

    it("streams the response body as sent: the client has the first line before the worker writes the rest", async () => {
      const name = uid("hold")
      let body = ""
      const { status, firstIn, ended } = await within(
        new Promise<{ status: number; firstIn: Promise<void>; ended: Promise<boolean> }>((resolve, reject) => {
          const req = http.get({ host: "127.0.0.1", port: f.pinboard.port, path: `/threads/${uid()}/hold?name=${name}`, agent: false }, (res) => {
            expect(headerValues(res.rawHeaders, "x-accel-buffering")).toEqual(["no"])
            const firstIn = new Promise<void>((first) => res.on("data", (chunk: Buffer) => ((body += chunk.toString()), first())))
            const ended = new Promise<boolean>((end) => res.once("close", () => end(res.complete)))
            resolve({ status: res.statusCode ?? 0, firstIn, ended })
          })
          req.on("error", reject)
        }),
        5000,
        "the held response's headers"
      )
      expect(status).toBe(200)
      await within(firstIn, 5000, "the first line while the worker holds the rest")
      // The worker writes the rest only once released, so the first line was not held back for it.
      expect(body).toBe("held\n")
      expect((await request(f.a, `/threads/x/release?name=${name}`)).status).toBe(200)
      expect(await ended).toBe(true)
      expect(body).toBe("held\nreleased\n")
    })

    fullIt("downloads of several MiB arrive intact", async () => {
      const bytes = 16 * 1024 * 1024 + 7
      const answer = await request(f.pinboard, `/threads/${uid()}/download?bytes=${bytes}`)
      expect(answer.status).toBe(200)
      expect(answer.body.length).toBe(bytes)
      const expected = Buffer.alloc(bytes)
      for (let i = 0; i < bytes; i++) expected[i] = i % 251
      expect(answer.body.equals(expected)).toBe(true)
    })

    fullIt("a worker that resets mid-body cuts the client's response, and Pinboard keeps serving", async () => {
      const id = uid()
      const exchange = await rawExchange(
        f.pinboard.port,
        rawRequestHead("GET", `/threads/${id}/reset`, [["Host", "client.example"]]),
        5000
      )
      expect(exchange.closed).toBe(true)
      const answer = parseResponse(exchange.bytes)
      expect(answer.status).toBe(200)
      expect(answer.body.toString()).toContain("partial body")
      expect(answer.complete).toBe(false)
      expect(echoOf(await request(f.pinboard, `/threads/${id}/echo`)).worker).toBe(f.a.id)
    })
  })

  // ---- in-band refusal -------------------------------------------------------------------------

  describe("in-band refusal", () => {
    const refusalHeadersAbsent = (answer: Answer) => {
      const names = headerNames(answer.rawHeaders)
      expect(names).not.toContain("pinned-refusal")
      expect(names).not.toContain("x-refusal-marker")
      expect(headerValues(answer.rawHeaders, "retry-after")).not.toContain("7")
    }

    it("re-places a refused request without a body once, on another worker; the refusal never reaches the client", async () => {
      const id = uid()
      const key = uid("key")
      const answer = await request(f.pinboard, `/pair/${id}/refuse?key=${key}&mode=once`)
      const echo = echoOf(answer)
      refusalHeadersAbsent(answer)
      const log = f.fleet.keyLog(key)
      expect(log).toHaveLength(2)
      const [refusedBy] = log[0]!.split(" ")
      expect(log[0]).toBe(`${refusedBy} refused GET /pair/${id}/refuse?key=${key}&mode=once`)
      expect(log[1]).toBe(`${echo.worker} served GET /pair/${id}/refuse?key=${key}&mode=once`)
      expect(echo.worker).not.toBe(refusedBy)
      expect(await placementOf(f.pinboard, "/pair", id)).toMatchObject({ worker: echo.worker, live: true })
    })

    it('answers a refused request with a body 503 {"error":"worker refused activation, retry"}: released, never replayed, a nack counted', async () => {
      const id = uid()
      const key = uid("key")
      const before = { [f.a.id]: await nacksOf(f.pinboard, f.a.id), [f.b.id]: await nacksOf(f.pinboard, f.b.id) }
      const answer = await request(f.pinboard, `/pair/${id}/refuse?key=${key}`, { method: "POST", body: "a body that is never replayed" })
      expectOwn(answer, 503, JSON_TYPE, '{"error":"worker refused activation, retry"}')
      expect(headerValues(answer.rawHeaders, "retry-after")).toEqual(["1"])
      refusalHeadersAbsent(answer)
      const log = f.fleet.keyLog(key)
      expect(log).toHaveLength(1)
      const [refusedBy] = log[0]!.split(" ")
      await eventually(async () => expect(await placementOf(f.pinboard, "/pair", id)).toBeUndefined())
      await eventually(async () => expect(await nacksOf(f.pinboard, refusedBy!)).toBe(before[refusedBy!]! + 1))
    })

    fullIt("answers 503 worker refused activation when the retry refuses too", async () => {
      const id = uid()
      const key = uid("key")
      const answer = await request(f.pinboard, `/pair/${id}/refuse?key=${key}`)
      expectOwn(answer, 503, JSON_TYPE, '{"error":"worker refused activation, retry"}')
      refusalHeadersAbsent(answer)
      const refusers = f.fleet.keyLog(key).map((line) => line.split(" ")[0])
      expect(refusers.sort()).toEqual([f.a.id, f.b.id].sort())
      await eventually(async () => expect(await placementOf(f.pinboard, "/pair", id)).toBeUndefined())
    })

    fullIt("answers 503 worker refused activation when no other worker exists", async () => {
      const id = uid()
      const key = uid("key")
      const answer = await request(f.pinboard, `/threads/${id}/refuse?key=${key}`)
      expectOwn(answer, 503, JSON_TYPE, '{"error":"worker refused activation, retry"}')
      refusalHeadersAbsent(answer)
      expect(f.fleet.keyLog(key)).toEqual([`${f.a.id} refused GET /threads/${id}/refuse?key=${key}`])
      await eventually(async () => expect(await placementOf(f.pinboard, "/threads", id)).toBeUndefined())
    })
  })

  // ---- bad input -------------------------------------------------------------------------------

  if (full) describe("bad input", () => {
    fullIt("answers malformed request lines and headers 400, and keeps serving", async () => {
      const cases = [
        "GARBAGE\r\n\r\n",
        "GET /threads/x y/echo HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /threads/x/echo HTTP/1.1\r\nHost: h\r\nNo colon here\r\n\r\n",
        "GET /threads/x/echo HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n",
        "GET /threads/x/echo HTTP/1.1\r\nHost: h\r\nX: a\u0000b\r\n\r\n",
        "GET /threads/x/echo HTTP/1.1\r\nHost: h\r\nContent-Length: abc\r\n\r\n",
        "GET /threads/x/echo HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "POST /threads/x/echo HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "GET /threads/x/echo HTTP/1.1\nHost: h\n\n"
      ]
      for (const bytes of cases) {
        const exchange = await rawExchange(f.pinboard.port, Buffer.from(bytes, "latin1"))
        expect({ bytes, line: exchange.bytes.toString("latin1").split("\r\n")[0], closed: exchange.closed }).toEqual({
          bytes,
          line: "HTTP/1.1 400 Bad Request",
          closed: true
        })
      }
      expect((await request(f.pinboard, "/healthz")).status).toBe(200)
      expect(echoOf(await request(f.pinboard, `/threads/${uid()}/echo`)).worker).toBe(f.a.id)
    })

    fullIt("keeps serving after a client disconnects mid-upload", async () => {
      const id = uid()
      const key = uid("key")
      await new Promise<void>((resolve) => {
        const req = http.request({
          host: "127.0.0.1",
          port: f.pinboard.port,
          method: "POST",
          path: `/threads/${id}/upload?key=${key}`,
          agent: false,
          headers: { "content-length": String(10 * 1024 * 1024) }
        })
        req.on("error", () => resolve())
        req.on("close", () => resolve())
        req.write(randomBytes(1024 * 1024))
        // Cut once the upload is forwarded: the worker has logged the request.
        void eventually(() => expect(f.fleet.keyLog(key)).toHaveLength(1), 5000).then(() => req.destroy(), () => req.destroy())
      })
      expect(f.fleet.keyLog(key)).toHaveLength(1)
      expect((await request(f.pinboard, "/healthz")).status).toBe(200)
      expect(echoOf(await request(f.pinboard, `/threads/${id}/echo`)).worker).toBe(f.a.id)
    })

    fullIt("keeps serving after a client disconnects mid-download", async () => {
      const id = uid()
      const downloaded = new Promise<void>((resolve) => {
        const req = http.get(
          { host: "127.0.0.1", port: f.pinboard.port, path: `/threads/${id}/download?bytes=${256 * 1024 * 1024}`, agent: false },
          (res) => {
            let received = 0
            res.on("data", (chunk: Buffer) => {
              received += chunk.length
              if (received > 1024 * 1024) req.destroy()
            })
          }
        )
        req.on("error", () => undefined)
        req.on("close", () => resolve())
      })
      await within(downloaded, 5000, "a MiB of the download, then the cut")
      expect((await request(f.pinboard, "/healthz")).status).toBe(200)
      expect(echoOf(await request(f.pinboard, `/threads/${id}/echo`)).worker).toBe(f.a.id)
    })
  })
})

describe("inflight cap (docs/proxy.md), embedded registry", () => {
  let fleet: Fleet
  beforeAll(() => {
    fleet = new Fleet()
  })
  afterAll(async () => {
    await fleet?.stop()
  })

  it('503 {"error":"worker at capacity, retry"} above forwards.maxInflight forwards awaiting headers', async () => {
    // A header timeout the test's steps never reach: the held forward is released by the test.
    const pinboard = await fleet.pinboard({ config: { forwards: { timeoutMs: scaled(10_000), maxInflight: 1 } } })
    const worker = await fleet.worker(pinboard, { id: uid("wc"), namespaces: ["/threads"] })
    await waitForColdStart(pinboard, "/threads")
    const key = uid("key")
    const name = uid("hold")
    // Awaits headers until the test releases it.
    const held = request(pinboard, `/threads/${uid()}/hold?name=${name}&silent=1&key=${key}`)
    await eventually(() => expect(fleet.keyLog(key)).toHaveLength(1), 5000)

    const refused = await request(pinboard, `/threads/${uid()}/echo`)
    expectOwn(refused, 503, JSON_TYPE, '{"error":"worker at capacity, retry"}')
    expect(headerValues(refused.rawHeaders, "retry-after")).toEqual(["1"])

    expect((await request(worker, `/threads/x/release?name=${name}`)).status).toBe(200)
    expect(await held).toMatchObject({ status: 200, text: "released\n" })
    expect(echoOf(await request(pinboard, `/threads/${uid()}/echo`)).worker).toBe(worker.id)
  })
})
