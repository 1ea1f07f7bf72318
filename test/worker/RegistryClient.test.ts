// The worker library's registry client against a server playing Pinboard's registry API
// (docs/registry-api.md): answers are decoded with Schema, so one that does not fit fails the
// call with a message saying what did not fit (the lease keeper retries it), never a cast
// that lets `undefined` through.
import http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { httpRegistryClient, RegistryCallFailed } from "../../src/worker/RegistryClient.js"

let answer: { status: number; body: string } = { status: 200, body: "{}" }
const server = http.createServer((req, res) => {
  req.resume()
  req.on("end", () => res.writeHead(answer.status, { "content-type": "application/json" }).end(answer.body))
})

beforeAll(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve)))
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

const client = () =>
  httpRegistryClient({
    pinboard: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    token: "t",
    worker: "w1",
    advertiseUrl: "http://127.0.0.1:1",
    namespaces: ["/threads"]
  })

const status = { headroom: 1, draining: false }
const answering = (status: number, json: unknown) => (answer = { status, body: typeof json === "string" ? json : JSON.stringify(json) })

describe("the worker's registry client", () => {
  it("decodes a register answer; buckets and unrenewed are optional", async () => {
    answering(200, { worker: "w1", incarnation: "i1", leaseMs: 15000, heartbeatMs: 5000, leaseExpiresAt: 1 })
    expect(await client().register(status)).toEqual({ incarnation: "i1", leaseMs: 15000, heartbeatMs: 5000, unrenewed: [] })
    answering(200, { incarnation: "i1", leaseMs: 15000, heartbeatMs: 5000, buckets: 16, unrenewed: [3], extra: true })
    expect(await client().register(status)).toEqual({ incarnation: "i1", leaseMs: 15000, heartbeatMs: 5000, buckets: 16, unrenewed: [3] })
  })

  it("a register answer that does not fit fails the call and names the field", async () => {
    answering(200, { leaseMs: 15000, heartbeatMs: 5000 })
    const failed = await client().register(status).catch((error: unknown) => error)
    expect(failed).toBeInstanceOf(RegistryCallFailed)
    expect(String((failed as Error).message)).toMatch(/register: unexpected answer: .*incarnation/s)
    answering(200, { incarnation: "i1", leaseMs: "15000", heartbeatMs: 5000 })
    expect(String(await client().register(status).catch((error: Error) => error.message))).toMatch(/leaseMs/)
  })

  it("decodes heartbeat answers: wind-down entries (env absent is \"\"), 410 lease lost", async () => {
    answering(200, { leaseExpiresAt: 1, windDown: [{ namespace: "/threads", id: "t1", epoch: "7", deadline: 99 }] })
    expect(await client().heartbeat("i1", status)).toEqual({
      _tag: "Renewed",
      windDown: [{ namespace: "/threads", id: "t1", env: "", epoch: "7", deadline: 99 }],
      unrenewed: []
    })
    answering(200, { leaseExpiresAt: 1, windDown: [{ namespace: "/threads", id: "t1", epoch: 7, deadline: 99 }] })
    expect(String(await client().heartbeat("i1", status).catch((error: Error) => error.message))).toMatch(/heartbeat: unexpected answer: .*epoch/s)
    answering(410, { error: "lease lost" })
    expect(await client().heartbeat("i1", status)).toEqual({ _tag: "LeaseLost" })
  })

  it("a body that is not JSON fails the call as a RegistryCallFailed", async () => {
    answering(502, "<html>bad gateway</html>")
    const failed = await client().heartbeat("i1", status).catch((error: unknown) => error)
    expect(failed).toBeInstanceOf(RegistryCallFailed)
    expect((failed as Error).message).toMatch(/502 with a body that is not JSON/)
  })

  it("a RegistryCallFailed is a tagged error and an Error, named and with its message", async () => {
    answering(503, { error: "no" })
    const failed = await client().deregister("i1").catch((error: unknown) => error)
    expect(failed).toBeInstanceOf(RegistryCallFailed)
    expect(failed).toBeInstanceOf(Error)
    expect((failed as RegistryCallFailed)._tag).toBe("RegistryCallFailed")
    expect((failed as Error).name).toBe("RegistryCallFailed")
    expect(String(failed)).toBe('RegistryCallFailed: deregister: 503 {"error":"no"}')
  })
})
