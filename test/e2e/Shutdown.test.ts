// Graceful shutdown of the built binary (DESIGN 9, 11 "Shutdown"): on SIGTERM /readyz
// turns 503 and never 200 again, the listener stops accepting, in-flight forwards get
// shutdown.graceMs to finish, then tunnels close; exit 0.
import { afterEach, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { Fleet, uid, waitForColdStart, type Pinboard } from "../support/Fleet.js"
import { request } from "../support/Wire.js"

let fleet: Fleet
afterEach(async () => {
  await fleet.stop()
})

const start = async (graceMs: number) => {
  fleet = new Fleet()
  const pinboard = await fleet.pinboard({ config: { shutdown: { graceMs } } })
  await fleet.worker(pinboard, { id: uid("w"), namespaces: ["/threads"] })
  await waitForColdStart(pinboard, "/threads")
  return pinboard
}

const openTunnel = async (pinboard: Pinboard) => {
  const socket = new WebSocket(`ws://127.0.0.1:${pinboard.port}/threads/${uid("room")}/ws`)
  await new Promise((resolve, reject) => {
    socket.once("open", resolve)
    socket.once("error", reject)
  })
  const closed = new Promise<number>((resolve) => socket.once("close", () => resolve(performance.now())))
  socket.on("error", () => {})
  return { socket, closed }
}

describe("shutdown", () => {
  it("lets an in-flight forward finish, refuses new connections, closes tunnels after it, exits 0", async () => {
    const pinboard = await start(5_000)
    const tunnel = await openTunnel(pinboard)
    const inFlight = request(pinboard, `/threads/${uid("t")}/stream?chunks=4&everyMs=300`)
    await new Promise((resolve) => setTimeout(resolve, 150))

    process.kill(pinboard.pid, "SIGTERM")
    const signalled = performance.now()
    const answer = await inFlight
    expect(answer.status).toBe(200)
    expect(answer.text).toBe("chunk 0\nchunk 1\nchunk 2\nchunk 3\n")

    const tunnelClosedAt = await tunnel.closed
    // Closed once the forward was done, well before the grace period ran out.
    expect(tunnelClosedAt - signalled).toBeLessThan(4_000)
    expect(await pinboard.process.exited).toEqual({ code: 0, signal: null })
    await expect(fetch(`${pinboard.url}/readyz`)).rejects.toThrow()
  })

  it("cuts a forward that outlasts shutdown.graceMs, and still exits 0", async () => {
    const pinboard = await start(500)
    const inFlight = request(pinboard, `/threads/${uid("t")}/stream?chunks=20&everyMs=200`).then(
      (answer) => answer.status,
      () => "cut"
    )
    await new Promise((resolve) => setTimeout(resolve, 150))
    process.kill(pinboard.pid, "SIGTERM")
    expect(await inFlight).toBe("cut")
    expect(await pinboard.process.exited).toEqual({ code: 0, signal: null })
  })

  it("answers /readyz 503 while draining", async () => {
    const pinboard = await start(3_000)
    // Keep the process draining with a slow forward, and ask /readyz on a connection opened before.
    const inFlight = request(pinboard, `/threads/${uid("t")}/stream?chunks=5&everyMs=300`)
    const agentSocket = await import("node:net").then(({ connect }) => connect(pinboard.port, "127.0.0.1"))
    await new Promise((resolve) => agentSocket.once("connect", resolve))
    await new Promise((resolve) => setTimeout(resolve, 150))
    process.kill(pinboard.pid, "SIGTERM")
    await new Promise((resolve) => setTimeout(resolve, 200))
    const reply = await new Promise<string>((resolve) => {
      let text = ""
      agentSocket.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")))
      agentSocket.on("close", () => resolve(text))
      agentSocket.on("error", () => resolve(text))
      agentSocket.write("GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    })
    expect(reply).toMatch(/^HTTP\/1\.1 503 /)
    expect(reply).toContain('{"error":"not ready"}')
    expect((await inFlight).status).toBe(200)
    expect(await pinboard.process.exited).toEqual({ code: 0, signal: null })
  })
})
