// The built Pinboard behind a balancer (docs/deploy.md "Behind a load balancer"): the client's
// address from a trusted peer's X-Forwarded-For and from a PROXY protocol header, connection
// timeouts that outlast a balancer's idle connections, and the registry API on its own listener.
import type { ServerResponse } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { Fleet, registryCall, TOKEN, uid, waitForColdStart, type Pinboard, type Worker } from "../support/Fleet.js"
import { poll, scaled } from "../support/Time.js"
import { headerValues, parseResponse, rawConnection, rawExchange, rawRequestHead, request } from "../support/Wire.js"

const LIBRARY = new URL("../../dist/worker/index.js", import.meta.url).pathname

interface Echo {
  readonly rawHeaders: ReadonlyArray<string>
}

const echoOf = (bytes: Buffer): Echo => {
  const answer = parseResponse(bytes)
  if (answer.status !== 200) throw new Error(`expected the worker's 200, got ${answer.status}: ${answer.body.toString()}`)
  return JSON.parse(answer.body.toString()) as Echo
}

const echoHead = (id: string, headers: ReadonlyArray<[string, string]> = []) =>
  rawRequestHead("GET", `/threads/${id}/echo`, [["Host", "client.example"], ...headers])

/** The access line of the request for `id`. */
const accessLine = (pinboard: Pinboard, id: string) =>
  poll(
    () => pinboard.process.lines.map((line) => JSON.parse(line) as Record<string, unknown>).find((line) => line.message === "access" && line.id === id),
    { timeoutMs: 5_000, reason: `the access line of ${id}` }
  )

const proxyV2 = (source: string, port: number): Buffer => {
  const signature = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a])
  const addresses = Buffer.alloc(12)
  source.split(".").forEach((byte, i) => addresses.writeUInt8(Number(byte), i))
  Buffer.from([10, 0, 0, 1]).copy(addresses, 4)
  addresses.writeUInt16BE(port, 8)
  addresses.writeUInt16BE(8080, 10)
  return Buffer.concat([signature, Buffer.from([0x21, 0x11, 0x00, 12]), addresses])
}

describe("behind a trusted balancer: the client's address from X-Forwarded-For", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  let workers: ReadonlyArray<Worker>
  beforeAll(async () => {
    pinboard = await fleet.pinboard({ env: { PINBOARD_TRUSTED_PROXIES: "10.0.0.0/8, 127.0.0.1", PINBOARD_ACCESS_LOG: "1" } })
    workers = [await fleet.worker(pinboard, { id: uid("w"), namespaces: ["/threads"] }), await fleet.worker(pinboard, { id: uid("w"), namespaces: ["/threads"] })]
    await waitForColdStart(pinboard, "/threads")
  })
  afterAll(() => fleet.stop())

  it("is the right-most entry that is not trusted: the worker gets it as X-Forwarded-For, the access line as client", async () => {
    const id = uid("t")
    const answer = await rawExchange(pinboard.port, echoHead(id, [["X-Forwarded-For", "198.51.100.1, 203.0.113.9, 10.1.1.1"]]))
    expect(headerValues(echoOf(answer.bytes).rawHeaders, "x-forwarded-for")).toEqual(["203.0.113.9"])
    expect(await accessLine(pinboard, id)).toMatchObject({ client: "203.0.113.9", status: 200 })
  })

  it("is the peer when the request brings no X-Forwarded-For", async () => {
    const id = uid("t")
    const answer = await rawExchange(pinboard.port, echoHead(id))
    expect(headerValues(echoOf(answer.bytes).rawHeaders, "x-forwarded-for")).toEqual(["127.0.0.1"])
    expect(await accessLine(pinboard, id)).toMatchObject({ client: "127.0.0.1" })
  })

  it("is what ip affinity ranks: new ids of different clients spread over the workers", async () => {
    const owners = new Set<string>()
    for (let client = 1; client <= 16; client++) {
      const id = uid("t")
      expect((await rawExchange(pinboard.port, echoHead(id, [["X-Forwarded-For", `203.0.113.${client}`]]))).bytes.toString()).toMatch(/^HTTP\/1\.1 200 /)
      const placed = await registryCall(pinboard, "GET", `/registry/placements/threads/${id}`)
      owners.add((placed.json as { worker: string }).worker)
    }
    expect([...owners].sort()).toEqual(workers.map((worker) => worker.id).sort())
  })
})

describe("connection timeouts that outlast a balancer's", () => {
  const fleet = new Fleet()
  afterAll(() => fleet.stop())

  it("keeps an idle keep-alive connection past Node's old 5 s, and closes one idle past keepAliveTimeoutMs", async () => {
    const [lasting, short] = await Promise.all([fleet.pinboard(), fleet.pinboard({ env: { PINBOARD_KEEPALIVE_TIMEOUT_MS: "500" } })])
    const head = rawRequestHead("GET", "/healthz", [["Host", "x"], ["Connection", "keep-alive"]])
    const kept = await rawConnection(lasting.port)
    const closed = await rawConnection(short!.port)
    kept.write(head)
    closed.write(head)
    await Promise.all([kept.responses(1), closed.responses(1)])
    await new Promise((resolve) => setTimeout(resolve, 6_000))
    kept.write(head)
    expect((await kept.responses(2)).map((response) => response.status)).toEqual([200, 200])
    closed.write(head)
    await expect(closed.responses(2)).rejects.toThrow(/closed after 1 of 2/)
    kept.close()
  })

  it("leaves a quiet WebSocket tunnel and a slow stream alone, however short the timeouts", async () => {
    const pinboard = await fleet.pinboard({ env: { PINBOARD_KEEPALIVE_TIMEOUT_MS: "300", PINBOARD_HEADERS_TIMEOUT_MS: "500" } })
    await fleet.worker(pinboard, { id: uid("w"), namespaces: ["/threads"] })
    await waitForColdStart(pinboard, "/threads")
    const socket = new WebSocket(`ws://127.0.0.1:${pinboard.port}/threads/${uid("room")}/ws`)
    await new Promise((resolve, reject) => {
      socket.once("open", resolve)
      socket.once("error", reject)
    })
    // Quiet for six headers timeouts (the check runs every 500 ms here), then an echo.
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    const echoed = new Promise<string>((resolve) => socket.once("message", (data: Buffer) => resolve(data.toString())))
    socket.send("still here")
    expect(await echoed).toBe("still here")
    socket.close()
    // Five chunks a second apart: each gap is past both timeouts.
    const stream = await request(pinboard, `/threads/${uid("t")}/stream?chunks=5&everyMs=1000`)
    expect(stream.status).toBe(200)
    expect(stream.body.toString()).toBe("chunk 0\nchunk 1\nchunk 2\nchunk 3\nchunk 4\n")
  })

  it("closes a connection whose headers do not arrive within headersTimeoutMs", async () => {
    const pinboard = await fleet.pinboard({ env: { PINBOARD_HEADERS_TIMEOUT_MS: "1000" } })
    const started = performance.now()
    const exchange = await rawExchange(pinboard.port, "GET /healthz HTTP/1.1\r\nHost: x\r\n", 10_000)
    expect(exchange.closed).toBe(true)
    expect(performance.now() - started).toBeLessThan(scaled(5_000))
  })
})

describe("the registry API on its own listener (PINBOARD_REGISTRY_PORT)", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  beforeAll(async () => {
    pinboard = await fleet.pinboard({ registryPort: true })
    await fleet.worker(pinboard, { id: uid("w"), namespaces: ["/threads"] })
    await waitForColdStart(pinboard, "/threads")
  })
  afterAll(() => fleet.stop())

  it("answers /registry/* there, and 404 not found for it on the data port", async () => {
    expect((await registryCall(pinboard, "GET", "/registry/workers")).status).toBe(200)
    const onData = await request(pinboard, "/registry/workers", { headers: [["Authorization", "Bearer x"]] })
    expect(onData.status).toBe(404)
    expect(onData.body.toString()).toBe('{"error":"not found"}')
  })

  it("serves the probes on both listeners, and no instance request on the registry's", async () => {
    const registryPort = Number(new URL(pinboard.registryUrl).port)
    for (const port of [pinboard.port, registryPort]) {
      expect((await request({ port }, "/healthz")).status).toBe(200)
      expect((await request({ port }, "/readyz")).status).toBe(200)
    }
    const instance = await request({ port: registryPort }, `/threads/${uid("t")}/echo`)
    expect(instance.status).toBe(404)
    expect(instance.body.toString()).toBe('{"error":"not found"}')
  })

  it("places ids on the workers that registered there, through the data port", async () => {
    expect((await request(pinboard, `/threads/${uid("t")}/echo`)).status).toBe(200)
  })

  it("a library worker given registryUrl registers there, and its calls between instances go to the data port", async () => {
    const { defineInstance, startWorker } = await import(LIBRARY)
    const relay = defineInstance({
      activate: () => ({}),
      routes: {
        "GET /hello": (_request: unknown, res: ServerResponse) => res.end("hello"),
        "GET /relay": async ({ call }: { call: (ns: string, id: string, path: string) => Promise<Response> }, res: ServerResponse) =>
          res.end(`relayed ${await (await call("/relays", "other", "/hello")).text()}`)
      }
    })
    const worker = await startWorker({
      pinboard: pinboard.url,
      registryUrl: pinboard.registryUrl,
      token: TOKEN,
      worker: uid("lib"),
      instances: { "/relays": relay },
      stopOnSignals: [],
      log: () => undefined
    })
    try {
      await worker.registered()
      await waitForColdStart(pinboard, "/relays")
      const answer = await request(pinboard, `/relays/${uid("r")}/relay`)
      expect(answer.status).toBe(200)
      expect(answer.body.toString()).toBe("relayed hello")
    } finally {
      await worker.stop()
    }
  })
})

describe("PROXY protocol on the data listener (PINBOARD_PROXY_PROTOCOL=1)", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  beforeAll(async () => {
    // The workers register on the registry's listener, which takes no PROXY header.
    pinboard = await fleet.pinboard({ registryPort: true, env: { PINBOARD_PROXY_PROTOCOL: "1", PINBOARD_TRUSTED_PROXIES: "10.0.0.0/8", PINBOARD_ACCESS_LOG: "1" } })
    await fleet.worker(pinboard, { id: uid("w"), namespaces: ["/threads"] })
    await waitForColdStart(pinboard, "/threads", undefined, async (path) => {
      const answer = parseResponse((await rawExchange(pinboard.port, `PROXY TCP4 203.0.113.1 10.0.0.1 51000 8080\r\n${rawRequestHead("GET", path, [["Host", "x"]])}`)).bytes)
      return { status: answer.status, text: answer.body.toString() }
    })
  })
  afterAll(() => fleet.stop())

  it("takes the client's address from a v1 header, and from a v2 header", async () => {
    const v1 = uid("t")
    const answer = await rawExchange(pinboard.port, `PROXY TCP4 203.0.113.9 10.0.0.1 51000 8080\r\n${echoHead(v1)}`)
    expect(headerValues(echoOf(answer.bytes).rawHeaders, "x-forwarded-for")).toEqual(["203.0.113.9"])
    expect(await accessLine(pinboard, v1)).toMatchObject({ client: "203.0.113.9" })
    const v2 = await rawExchange(pinboard.port, Buffer.concat([proxyV2("198.51.100.7", 51001), Buffer.from(echoHead(uid("t")))]))
    expect(headerValues(echoOf(v2.bytes).rawHeaders, "x-forwarded-for")).toEqual(["198.51.100.7"])
  })

  it("trusts the header's source as it would a peer: a trusted one's X-Forwarded-For names the client", async () => {
    const answer = await rawExchange(pinboard.port, `PROXY TCP4 10.2.3.4 10.0.0.1 51000 8080\r\n${echoHead(uid("t"), [["X-Forwarded-For", "203.0.113.50"]])}`)
    expect(headerValues(echoOf(answer.bytes).rawHeaders, "x-forwarded-for")).toEqual(["203.0.113.50"])
    const untrusted = await rawExchange(pinboard.port, `PROXY TCP4 203.0.113.9 10.0.0.1 51000 8080\r\n${echoHead(uid("t"), [["X-Forwarded-For", "203.0.113.50"]])}`)
    expect(headerValues(echoOf(untrusted.bytes).rawHeaders, "x-forwarded-for")).toEqual(["203.0.113.9"])
  })

  it("closes a connection that opens without a header, answering nothing", async () => {
    const exchange = await rawExchange(pinboard.port, echoHead(uid("t")))
    expect(exchange).toEqual({ bytes: Buffer.alloc(0), closed: true })
  })
})
