// WebSockets through Pinboard end to end (docs/proxy.md "WebSockets"
// and "Retries"): the built Pinboard on a real redis-server and on a local Redis
// Cluster (and a smaller set on the embedded registry), fixture workers speaking `ws`, the `ws`
// client and raw sockets to see the bare status lines byte for byte.
import type { IncomingMessage } from "node:http"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import {
  eventually,
  Fleet,
  LEASE_MS,
  placementOf,
  STANDARD_CONFIG,
  uid,
  waitForColdStart,
  type Pinboard,
  type StandardFleet,
  useStandardFleet
} from "../support/Fleet.js"
import { headerNames, headerValues, rawExchange, rawUpgradeHead } from "../support/Wire.js"
import { freePort } from "../support/Processes.js"
import { quietWindow } from "../support/Time.js"

const ORIGIN = "https://app.example"

interface Opened {
  readonly ws: WebSocket
  readonly response: IncomingMessage
}

/** Opens a WebSocket through Pinboard; rejects with the status when the answer is not a 101. */
const open = (pinboard: Pinboard, path: string, headers: Record<string, string> = {}): Promise<Opened> =>
  new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${pinboard.port}${path}`, { headers })
    let response: IncomingMessage | undefined
    ws.once("upgrade", (res) => (response = res))
    ws.once("open", () => resolve({ ws, response: response! }))
    ws.once("unexpected-response", (_req, res) => {
      reject(Object.assign(new Error(`unexpected response ${res.statusCode}`), { statusCode: res.statusCode }))
      ws.terminate()
    })
    ws.once("error", reject)
  })

const next = (ws: WebSocket): Promise<{ data: Buffer; isBinary: boolean }> =>
  new Promise((resolve, reject) => {
    ws.once("message", (data, isBinary) => resolve({ data: data as Buffer, isBinary }))
    ws.once("close", (code) => reject(new Error(`closed (${code}) before a message`)))
  })

const closed = (ws: WebSocket): Promise<{ code: number; reason: string }> =>
  new Promise((resolve) => ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })))

interface UpgradeInfo {
  readonly worker: string
  readonly url: string
  readonly headers: Record<string, string>
  readonly rawHeaders: Array<string>
}

const info = async (ws: WebSocket): Promise<UpgradeInfo> => {
  ws.send("__info__")
  return JSON.parse((await next(ws)).data.toString()) as UpgradeInfo
}

/** An upgrade on a raw socket: every byte Pinboard sends back, and whether it closed. */
const rawUpgrade = async (pinboard: Pinboard, target: string) => {
  const exchange = await rawExchange(pinboard.port, rawUpgradeHead(target, [["Origin", ORIGIN], ["Pinboard-Foo", "x"]]), 5000)
  return { text: exchange.bytes.toString("latin1"), closed: exchange.closed }
}

const bare = (status: string, retryAfter?: string) =>
  `HTTP/1.1 ${status}\r\n${retryAfter === undefined ? "" : `retry-after: ${retryAfter}\r\n`}connection: close\r\n\r\n`

/** A bare 503: the status line, `retry-after` in whole seconds >= 1, `connection: close`, nothing else. */
const BARE_503 = /^HTTP\/1\.1 503 Service Unavailable\r\nretry-after: [1-9][0-9]*\r\nconnection: close\r\n\r\n$/

describe.each(["redis", "cluster", "embedded"] as const)("WebSockets (%s registry)", (registry) => {
  const standard = useStandardFleet(registry)
  const fullIt = standard.fullIt
  let f: StandardFleet
  beforeAll(() => {
    f = standard.get()
  })

  describe("tunnel", () => {
    it("echoes text and binary through the tunnel; the worker sees Pinboard-Epoch, its own Host, the observed peer", async () => {
      const id = uid()
      const { ws } = await open(f.pinboard, `/threads/${id}/ws?q=%20x`, {
        origin: ORIGIN,
        authorization: "Bearer user-token",
        "x-forwarded-for": "10.0.0.1",
        "pinboard-foo": "from-client",
        host: "client.example"
      })
      try {
        const seen = await info(ws)
        expect(seen.worker).toBe(f.a.id)
        expect(seen.url).toBe(`/threads/${id}/ws?q=%20x`)
        expect(headerValues(seen.rawHeaders, "host")).toEqual([`127.0.0.1:${f.a.port}`])
        expect(headerValues(seen.rawHeaders, "x-forwarded-for")).toEqual(["127.0.0.1"])
        expect(headerValues(seen.rawHeaders, "authorization")).toEqual(["Bearer user-token"])
        expect(headerNames(seen.rawHeaders)).not.toContain("pinboard-foo")
        const epochs = headerValues(seen.rawHeaders, "pinboard-epoch")
        expect(epochs).toHaveLength(1)
        expect(epochs[0]).toMatch(/^(0|[1-9][0-9]*)$/)
        expect(await placementOf(f.pinboard, "/threads", id)).toMatchObject({ worker: f.a.id, epoch: epochs[0] })

        ws.send("hello")
        expect(await next(ws)).toEqual({ data: Buffer.from("hello"), isBinary: false })
        const blob = randomBytes(1024 * 1024)
        ws.send(blob)
        const echoed = await next(ws)
        expect(echoed.isBinary).toBe(true)
        expect(echoed.data.equals(blob)).toBe(true)
      } finally {
        ws.terminate()
      }
    })

    it("relays the worker's 101 with Pinboard-* and Pinned-Refusal removed, other headers kept", async () => {
      const { ws, response } = await open(f.pinboard, `/threads/${uid()}/ws`)
      try {
        expect(response.statusCode).toBe(101)
        const names = headerNames(response.rawHeaders)
        expect(names.filter((name) => name.startsWith("pinboard-"))).toEqual([])
        expect(names).not.toContain("pinned-refusal")
        expect(headerValues(response.rawHeaders, "x-worker-upgrade")).toEqual(["yes"])
        expect(headerValues(response.rawHeaders, "sec-websocket-accept")).toHaveLength(1)
      } finally {
        ws.terminate()
      }
    })

    fullIt("a close from the worker reaches the client with its code", async () => {
      const { ws } = await open(f.pinboard, `/threads/${uid()}/ws`)
      const done = closed(ws)
      ws.send("__close__")
      expect(await done).toEqual({ code: 4001, reason: "worker closed" })
    })

    fullIt("carries many tunnels at once, each to its own data", async () => {
      const tunnels = await Promise.all(Array.from({ length: 20 }, (_, i) => open(f.pinboard, `/pair/${uid(`many${i}`)}/ws`)))
      try {
        const answers = await Promise.all(
          tunnels.map(async ({ ws }, i) => {
            const reply = next(ws)
            ws.send(`message ${i}`)
            return (await reply).data.toString()
          })
        )
        expect(answers).toEqual(tunnels.map((_, i) => `message ${i}`))
      } finally {
        for (const { ws } of tunnels) ws.terminate()
      }
    })

    fullIt("a tunnel is not cut by forwards.timeoutMs", async () => {
      const { ws } = await open(f.pinboard, `/threads/${uid()}/ws`)
      try {
        let closed = false
        ws.once("close", () => (closed = true))
        // A window, not a wait: the tunnel must be shown open past the header timeout.
        await quietWindow(STANDARD_CONFIG.forwards.timeoutMs + 500)
        expect(closed).toBe(false)
        ws.send("still there")
        expect((await next(ws)).data.toString()).toBe("still there")
      } finally {
        ws.terminate()
      }
    })

    it("relays a worker's non-101 answer's status line", async () => {
      const answer = await rawUpgrade(f.pinboard, `/threads/${uid()}/ws-deny`)
      expect(answer.text.startsWith("HTTP/1.1 403 Forbidden\r\n")).toBe(true)
      await expect(open(f.pinboard, `/threads/${uid()}/ws-deny`)).rejects.toMatchObject({ statusCode: 403 })
    })
  })

  describe("failures before the tunnel: bare status lines", () => {
    it("unknown namespace: a bare 404, then the connection closes", async () => {
      for (const target of [`/unregistered/${uid()}/ws`, "/threads", "/threads/"]) {
        expect({ target, ...(await rawUpgrade(f.pinboard, target)) }).toEqual({ target, text: bare("404 Not Found"), closed: true })
      }
    })

    fullIt("an invalid id: a bare 400", async () => {
      for (const target of ["/threads//ws", "/threads/a%2Fb/ws", `/threads/${"a".repeat(257)}/ws`]) {
        expect({ target, ...(await rawUpgrade(f.pinboard, target)) }).toEqual({ target, text: bare("400 Bad Request"), closed: true })
      }
    })

    it("an upgrade to /healthz, /readyz or /registry/* is an instance request: a bare 404 unknown namespace", async () => {
      for (const target of ["/healthz", "/readyz", "/registry/x", "/registry/workers", `/registry/${uid()}/ws`]) {
        expect({ target, ...(await rawUpgrade(f.pinboard, target)) }).toEqual({ target, text: bare("404 Not Found"), closed: true })
      }
    })

    it("no live backends: a bare 503 with retry-after: 1", async () => {
      const ns = `/gone-${uid("ns")}`
      await (await f.fleet.virtualWorker(f.pinboard, { id: uid("v"), advertiseUrl: f.a.advertiseUrl, namespaces: [ns] })).deregister()
      expect(await rawUpgrade(f.pinboard, `${ns}/${uid()}/ws`)).toEqual({ text: bare("503 Service Unavailable", "1"), closed: true })
    })

    fullIt("an unreachable worker: a bare 502, and the placement is released", async () => {
      const ns = `/dead-${uid("ns")}`
      await f.fleet.virtualWorker(f.pinboard, { id: uid("dead"), advertiseUrl: `http://127.0.0.1:${await freePort()}`, namespaces: [ns] })
      const id = uid()
      expect(await rawUpgrade(f.pinboard, `${ns}/${id}/ws`)).toEqual({ text: bare("502 Bad Gateway"), closed: true })
      expect(await placementOf(f.pinboard, ns, id)).toBeUndefined()
    })
  })

  describe("in-band refusal", () => {
    it("re-places a refused upgrade once, on another worker; the refusal's headers never reach the client", async () => {
      const id = uid()
      const key = uid("key")
      const { ws, response } = await open(f.pinboard, `/pair/${id}/ws-refuse?key=${key}&mode=once`)
      try {
        expect(response.statusCode).toBe(101)
        expect(headerNames(response.rawHeaders)).not.toContain("x-refusal-marker")
        expect(headerNames(response.rawHeaders)).not.toContain("pinned-refusal")
        const seen = await info(ws)
        const log = f.fleet.keyLog(key)
        expect(log).toHaveLength(2)
        const [refusedBy, outcome] = log[0]!.split(" ")
        expect(outcome).toBe("refused")
        expect(log[1]).toBe(`${seen.worker} served GET /pair/${id}/ws-refuse?key=${key}&mode=once`)
        expect(seen.worker).not.toBe(refusedBy)
        expect(await placementOf(f.pinboard, "/pair", id)).toMatchObject({ worker: seen.worker })
        ws.send("after the retry")
        expect((await next(ws)).data.toString()).toBe("after the retry")
      } finally {
        ws.terminate()
      }
    })

    fullIt("when the re-placed upgrade is refused too: a bare 503, and the placement is released", async () => {
      const id = uid()
      const key = uid("key")
      const answer = await rawUpgrade(f.pinboard, `/pair/${id}/ws-refuse?key=${key}`)
      expect(answer.text).toMatch(BARE_503)
      expect(answer.closed).toBe(true)
      expect(f.fleet.keyLog(key).map((line) => line.split(" ")[0]).sort()).toEqual([f.a.id, f.b.id].sort())
      await eventually(async () => expect(await placementOf(f.pinboard, "/pair", id)).toBeUndefined())
    })
  })
})

describe("WebSockets on their own Pinboards (embedded registry)", () => {
  let fleet: Fleet
  beforeAll(() => {
    fleet = new Fleet()
  })
  afterAll(async () => {
    await fleet?.stop()
  })

  it("cold start: a bare 503 with retry-after in whole seconds", async () => {
    const pinboard = await fleet.pinboard({ config: STANDARD_CONFIG })
    try {
      await fleet.virtualWorker(pinboard, { id: uid("v"), advertiseUrl: "http://127.0.0.1:1", namespaces: ["/cold"] })
      const answer = await rawUpgrade(pinboard, `/cold/${uid()}/ws`)
      expect(answer.text).toMatch(BARE_503)
      expect(Number(/retry-after: (\d+)/.exec(answer.text)![1])).toBeLessThanOrEqual(Math.ceil(LEASE_MS / 1000))
      expect(answer.closed).toBe(true)
    } finally {
      await pinboard.stop()
    }
  })

  it("an upgrade to /registry/* reaches a worker that registered the namespace /registry", async () => {
    const pinboard = await fleet.pinboard({ config: STANDARD_CONFIG })
    try {
      const worker = await fleet.worker(pinboard, { id: uid("wr"), namespaces: ["/registry", "/warm"] })
      await waitForColdStart(pinboard, "/warm")
      const { ws } = await open(pinboard, "/registry/workers/ws")
      try {
        const seen = await info(ws)
        expect(seen).toMatchObject({ worker: worker.id, url: "/registry/workers/ws" })
      } finally {
        ws.terminate()
      }
      // Plain requests there are still the registry API.
      const api = await fetch(`${pinboard.url}/registry/workers/ws`)
      expect(api.status).toBe(401)
      expect(await api.text()).toBe('{"error":"invalid deployment token"}')
    } finally {
      await pinboard.stop()
    }
  })
})
