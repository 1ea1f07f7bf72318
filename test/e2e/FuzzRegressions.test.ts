// Regressions found by `npm run fuzz` (reliability/fuzz.ts), end to end through the built
// binary. Each test names the fuzz input family that found it.
//
// Registry paths with a `.` or `..` segment (fuzz: registry/heartbeat and registry/placement
// inputs). Worker ids and instance ids may be `.` or `..` (docs/registry-api.md: `[A-Za-z0-9._~-]{1,128}`,
// seed: `[A-Za-z0-9._~-]{1,256}`), and the data plane serves `/ns/../x` as id `..`, verbatim.
// The registry API parses its path with WHATWG `new URL()`, which removes dot segments:
// `/registry/workers/../heartbeat` becomes `/registry/heartbeat` (404 not found) and
// `/registry/placements/dots/..` becomes `/registry/placements/` (404 not found). So a worker
// registered as `..` can never renew its lease, and such an instance cannot be looked up.
// Fixed in 37e53e4 (the registry API splits the path as sent). `fetch` and undici normalize
// such paths on the client side too: these go over raw sockets.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Fleet, TOKEN, registryCall, uid, waitForColdStart, type Pinboard } from "../support/Fleet.js"
import { parseResponse, rawExchange, rawRequestHead, request } from "../support/Wire.js"
import { scaled } from "../support/Time.js"

const raw = async (pinboard: Pinboard, method: string, target: string, body?: unknown) => {
  const text = body === undefined ? "" : JSON.stringify(body)
  const head = rawRequestHead(method, target, [
    ["Host", "pinboard.test"],
    ["Authorization", `Bearer ${TOKEN}`],
    ...(body === undefined ? [] : ([["Content-Type", "application/json"], ["Content-Length", String(Buffer.byteLength(text))]] as Array<[string, string]>))
  ])
  const exchange = await rawExchange(pinboard.port, head + text, 5000)
  const response = parseResponse(exchange.bytes)
  return { status: response.status, text: response.body.toString("utf8") }
}

describe("fuzz regressions: dot segments in registry paths", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard

  beforeAll(async () => {
    try {
      pinboard = await fleet.pinboard()
      await fleet.worker(pinboard, { id: uid("w"), namespaces: ["/dots"] })
      await waitForColdStart(pinboard, "/dots")
    } catch (error) {
      await fleet.stop()
      throw error
    }
  }, scaled(60_000))
  afterAll(async () => {
    await fleet.stop()
  })

  it.each([".", ".."])("a worker that registered as %j heartbeats at /registry/workers/{worker}/heartbeat", async (worker) => {
    const registered = await registryCall(pinboard, "POST", "/registry/workers", {
      worker,
      advertiseUrl: "http://127.0.0.1:9",
      namespaces: ["/dot-workers"],
      headroom: 1
    })
    // `.` and `..` are worker ids like any other (docs/registry-api.md: `[A-Za-z0-9._~-]{1,128}`,
    // RegistryBodies.ts WorkerId): registration accepts them, and the worker must then be found
    // again at its own paths.
    expect({ status: registered.status, body: registered.text }).toMatchObject({ status: 200 })
    const { incarnation } = registered.json as { incarnation: string }
    const heartbeat = await raw(pinboard, "POST", `/registry/workers/${worker}/heartbeat`, { incarnation, headroom: 1 })
    expect({ status: heartbeat.status, body: heartbeat.text }).toMatchObject({ status: 200 })
    const deregistered = await raw(pinboard, "DELETE", `/registry/workers/${worker}?incarnation=${incarnation}`)
    expect(deregistered.status).toBe(204)
  })

  it.each([".", ".."])("an instance %j placed through the data plane is found at /registry/placements/{namespace}/{id}", async (id) => {
    const served = await request(pinboard, `/dots/${id}/echo`)
    expect(served.status).toBe(200)
    expect((JSON.parse(served.text) as { url: string }).url).toBe(`/dots/${id}/echo`)
    const placement = await raw(pinboard, "GET", `/registry/placements/dots/${id}`)
    expect({ status: placement.status, body: placement.text }).toMatchObject({ status: 200 })
    expect((JSON.parse(placement.text) as { namespace: string; id: string }).id).toBe(id)
  })
})
