// Hostname-aware mode end to end (docs/proxy.md "Hostname-aware mode", docs/config.md,
// 8 and 11): the built Pinboard on a real redis-server with PINBOARD_HOSTNAME_AWARE=1, fixture
// workers registering {namespace, hostname, env}; two hostnames on env prod (takeover
// wind_down), two on env strict (takeover deny), and rebindings to envs dev and blue.
import { decodeJwt } from "jose"
import WebSocket from "ws"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Fleet, registryCall, uid, type Pinboard } from "../support/Fleet.js"
import { poll, scaled } from "../support/Time.js"
import { parseResponse, rawExchange, request } from "../support/Wire.js"

const NS = "/docs"
const at = (hostname: string, env: string) => ({ namespace: NS, hostname, env })

describe("hostname-aware mode", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard

  const via = (hostname: string, id: string, rest = "/echo") => request(pinboard, `${NS}/${id}${rest}`, { headers: { host: `${hostname}:8080` } })
  const served = async (hostname: string, id: string) => {
    const answer = await via(hostname, id)
    expect(answer.status, answer.text).toBe(200)
    const echo = JSON.parse(answer.text) as { worker: string; headers: Record<string, string> }
    return { worker: echo.worker, epoch: echo.headers["pinboard-epoch"]!, claims: decodeJwt(echo.headers["pinboard-attestation"]!), host: echo.headers["host"] }
  }
  const json = (answer: { status: number; text: string; headers: Record<string, unknown> }) => ({
    status: answer.status,
    body: answer.text,
    retryAfter: answer.headers["retry-after"]
  })

  beforeAll(async () => {
    const redis = await fleet.redis()
    pinboard = await fleet.pinboard({ redis, config: { hostnameAware: true, envs: { strict: { takeover: "deny" } } } })
    await Promise.all([
      fleet.worker(pinboard, { id: "wa", namespaces: [], registrations: [at("a.example", "prod")], epoch: "1" }),
      fleet.worker(pinboard, { id: "wb", namespaces: [], registrations: [at("b.example", "prod")], epoch: "1" }),
      fleet.worker(pinboard, { id: "sc", namespaces: [], registrations: [at("c.example", "strict")], epoch: "1" }),
      fleet.worker(pinboard, { id: "sd", namespaces: [], registrations: [at("d.example", "strict")], epoch: "1" })
    ])
    // Registration was the buckets' first use: their cold start ends one lease later.
    for (const hostname of ["a.example", "b.example", "c.example", "d.example"]) {
      for (let i = 0; i < 32; i++) {
        const id = `warm-${hostname}-${i}`
        await poll(async () => (await via(hostname, id)).status !== 503, {
          timeoutMs: pinboard.leaseMs + 10_000,
          everyMs: 100,
          reason: `the end of the cold start for ${hostname} ${id}`
        })
      }
    }
  }, scaled(60_000))
  afterAll(() => fleet.stop())

  it("each hostname's ids go to its own workers; the attestation carries env and host; Host is not forwarded", async () => {
    for (let i = 0; i < 8; i++) {
      const a = await served("a.example", uid("a"))
      const b = await served("b.example", uid("b"))
      expect([a.worker, b.worker]).toEqual(["wa", "wb"])
      expect(a.claims).toMatchObject({ env: "prod", host: "a.example", ns: NS })
      expect(a.host).not.toContain("a.example")
    }
  })

  it("an unbound (hostname, namespace): 404 unknown namespace", async () => {
    expect(json(await via("nobody.example", "x"))).toMatchObject({ status: 404, body: '{"error":"unknown namespace"}' })
  })

  it("no Host header (raw socket): 400 missing Host header", async () => {
    const exchange = await rawExchange(pinboard.port, `GET ${NS}/x/echo HTTP/1.1\r\nconnection: close\r\n\r\n`)
    expect(exchange.bytes.toString()).toMatch(/^HTTP\/1\.1 400 /)
    expect(exchange.bytes.toString()).toContain('{"error":"missing Host header"}')
  })

  it("HTTP/1.0 without Host (raw socket): 400 missing Host header too; two Host lines: 400 more than one Host header", async () => {
    const http10 = await rawExchange(pinboard.port, `GET ${NS}/x/echo HTTP/1.0\r\n\r\n`)
    expect(http10.bytes.toString()).toMatch(/^HTTP\/1\.1 400 /)
    expect(http10.bytes.toString()).toContain('{"error":"missing Host header"}')
    const twice = await rawExchange(pinboard.port, `GET ${NS}/x/echo HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\nconnection: close\r\n\r\n`)
    expect(twice.bytes.toString()).toMatch(/^HTTP\/1\.1 400 /)
    expect(twice.bytes.toString()).toContain('{"error":"more than one Host header"}')
  })

  it("an absolute-form target names the hostname, not Host (RFC 9112 3.2.2)", async () => {
    const id = uid("abs")
    const exchange = await rawExchange(
      pinboard.port,
      `GET http://B.example:8080${NS}/${id}/echo HTTP/1.1\r\nHost: a.example\r\nconnection: close\r\n\r\n`
    )
    const echo = JSON.parse(parseResponse(exchange.bytes).body.toString()) as { worker: string; headers: Record<string, string> }
    expect(echo.worker).toBe("wb")
    expect(decodeJwt(echo.headers["pinboard-attestation"]!)).toMatchObject({ env: "prod", host: "b.example" })
  })

  it("takeover wind_down: 503 takeover in progress until the owner releases, then placed on the request's hostname's worker", async () => {
    const id = uid("t")
    const first = await served("a.example", id)
    const during = json(await via("b.example", id))
    expect(during).toMatchObject({ status: 503, body: '{"error":"takeover in progress, retry"}' })
    expect(Number(during.retryAfter)).toBeGreaterThanOrEqual(1)
    // Through the owner's own hostname it is still served.
    expect((await served("a.example", id)).worker).toBe("wa")
    // The owner finishes early: it releases at its epoch.
    expect(await registryCall(pinboard, "POST", "/registry/release", { namespace: NS, id, epoch: first.epoch, env: "prod" })).toMatchObject({ status: 200 })
    const taken = await served("b.example", id)
    expect(taken.worker).toBe("wb")
    expect(BigInt(taken.epoch) > BigInt(first.epoch)).toBe(true)
  })

  it("takeover wind_down without a release: the placement moves when the deadline passes", async () => {
    const id = uid("t")
    const first = await served("a.example", id)
    // Asked through b.example until the owner's wind-down deadline has passed: a takeover in progress till then.
    const answers: Array<{ status: number; body: string }> = []
    await poll(
      async () => {
        const answer = json(await via("b.example", id))
        answers.push(answer)
        return answer.status === 200
      },
      { timeoutMs: pinboard.leaseMs + 5000, everyMs: 100, reason: `${id} taken over through b.example` }
    )
    expect(answers.length).toBeGreaterThan(1)
    for (const during of answers.slice(0, -1)) expect(during).toMatchObject({ status: 503, body: '{"error":"takeover in progress, retry"}' })
    const taken = await served("b.example", id)
    expect([taken.worker, BigInt(taken.epoch) > BigInt(first.epoch)]).toEqual(["wb", true])
  })

  it("takeover deny (envs.strict): 503 placement held by another hostname", async () => {
    const id = uid("s")
    expect((await served("c.example", id)).worker).toBe("sc")
    expect(json(await via("d.example", id))).toMatchObject({ status: 503, body: '{"error":"placement held by another hostname"}' })
  })

  it("registrations: 409 for another env without a higher epoch; a higher epoch rebinds, and new ids wait one lease", async () => {
    const register = (worker: string, env: string, epoch: string) =>
      registryCall(pinboard, "POST", "/registry/workers", { worker, advertiseUrl: "http://127.0.0.1:9/", namespaces: [at("b.example", env)], headroom: 1, epoch })
    expect(await register("v-dev", "dev", "1")).toMatchObject({ status: 409, json: { error: "hostname binding held by another env" } })
    expect((await register("v-dev", "dev", "2")).status).toBe(200)
    expect(json(await via("b.example", uid("new")))).toMatchObject({ status: 503, body: '{"error":"hostname binding displaced, retry"}' })
  })

  it("a rebound pair: ids already placed in its new env keep being served through it while new ids wait", async () => {
    await fleet.worker(pinboard, { id: "wf", namespaces: [], registrations: [at("f.example", "prod")], epoch: "1" })
    // wh binds e.example to env blue and moves f.example there (a higher epoch): f.example is displaced.
    await fleet.worker(pinboard, { id: "wh", namespaces: [], registrations: [at("e.example", "blue"), at("f.example", "blue")], epoch: "2" })
    const id = uid("p")
    const placed = await served("e.example", id)
    expect([placed.worker, placed.claims.env]).toEqual(["wh", "blue"])
    const again = await served("f.example", id)
    expect([again.worker, again.epoch, again.claims.host]).toEqual(["wh", placed.epoch, "f.example"])
    const fresh = json(await via("f.example", uid("new")))
    expect(fresh).toMatchObject({ status: 503, body: '{"error":"hostname binding displaced, retry"}' })
    expect(Number(fresh.retryAfter)).toBeGreaterThanOrEqual(1)
  })

  it("a WebSocket upgrade through a hostname reaches that hostname's worker", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${pinboard.port}${NS}/${uid("w")}/ws`, { headers: { host: "a.example" } })
    const info = await new Promise<{ worker: string }>((resolve, reject) => {
      ws.once("open", () => ws.send("__info__"))
      ws.once("message", (data) => resolve(JSON.parse(data.toString()) as { worker: string }))
      ws.once("error", reject)
    })
    ws.close()
    expect(info.worker).toBe("wa")
  })
})
