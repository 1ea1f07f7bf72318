// Graceful shutdown of the built binary (docs/proxy.md "Shutdown"): on SIGTERM /readyz
// turns 503 and never 200 again, the listener stops accepting, in-flight forwards get
// shutdown.graceMs to finish, then tunnels close; exit 0. Its log lines mark the start
// (`pinboard draining`) and the end (`pinboard stopped`) of the stop. The forwards in flight are the
// worker's /hold, which ends only when the test releases it, so each check runs while the
// process is still draining.
import http from "node:http"
import net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { Fleet, uid, waitForColdStart, type Pinboard, type Worker } from "../support/Fleet.js"
import { poll, scaled, within } from "../support/Time.js"
import { request } from "../support/Wire.js"

let fleet: Fleet
afterEach(async () => {
  await fleet.stop()
})

/** A grace the test's own steps never use up: a forward it releases is never cut. */
const LONG_GRACE_MS = scaled(10_000)

const start = async (graceMs: number, drainDelayMs = 0) => {
  fleet = new Fleet()
  const pinboard = await fleet.pinboard({ config: { shutdown: { graceMs, drainDelayMs } } })
  const worker = await fleet.worker(pinboard, { id: uid("w"), namespaces: ["/threads"] })
  await waitForColdStart(pinboard, "/threads")
  return { pinboard, worker }
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

interface Held {
  readonly name: string
  /** The whole body once the response ends, or "cut"; with when that was. */
  readonly outcome: Promise<{ readonly body: string; readonly at: number }>
  readonly settled: () => boolean
}

/** A forward of the worker's /hold through Pinboard, resolved once its first line has reached the client. */
const holdOpen = (pinboard: Pinboard): Promise<Held> => {
  const name = uid("hold")
  const opened = new Promise<Held>((resolve, reject) => {
    const req = http.get({ host: "127.0.0.1", port: pinboard.port, path: `/threads/${uid("t")}/hold?name=${name}`, agent: false })
    req.once("error", reject)
    req.once("response", (res) => {
      if (res.statusCode !== 200) return reject(new Error(`the hold answered ${res.statusCode}`))
      let body = ""
      let settled = false
      const outcome = new Promise<{ body: string; at: number }>((done) => {
        res.once("close", () => {
          settled = true
          done({ body: res.complete ? body : "cut", at: performance.now() })
        })
        res.on("error", () => undefined)
      })
      res.on("data", (chunk: Buffer) => {
        body += chunk.toString()
        if (body === "held\n") resolve({ name, outcome, settled: () => settled })
      })
    })
  })
  return within(opened, 10_000, "the held forward's first line")
}

const release = async (worker: Worker, held: Held) => {
  expect((await request(worker, `/threads/x/release?name=${held.name}`)).status).toBe(200)
}

/** True when a new connection to the port is refused (nothing listens), false when it is accepted. */
const refused = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    socket.once("connect", () => {
      socket.destroy()
      resolve(false)
    })
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED"))
  })

const untilRefused = (pinboard: Pinboard) => poll(() => refused(pinboard.port), { timeoutMs: 5_000, reason: "the listener to stop accepting" })

describe("shutdown", () => {
  it("refuses new connections while an in-flight forward finishes, closes tunnels after it, exits 0", async () => {
    const { pinboard, worker } = await start(LONG_GRACE_MS)
    const tunnel = await openTunnel(pinboard)
    const held = await holdOpen(pinboard)

    const signalled = performance.now()
    process.kill(pinboard.pid, "SIGTERM")
    await untilRefused(pinboard)
    // Refused while still draining: the process is alive, the forward and the tunnel still open.
    expect(pinboard.process.exit).toBeUndefined()
    expect(held.settled()).toBe(false)
    expect(tunnel.socket.readyState).toBe(WebSocket.OPEN)
    // The graceful stop's first log line is written as it starts; its last only once it is over.
    const draining = JSON.parse((await pinboard.process.waitForLine(/"message":"pinboard draining"/, 5_000)).input!)
    expect(draining).toMatchObject({ level: "info", message: "pinboard draining", grace_ms: LONG_GRACE_MS, tunnels: 1 })
    expect(pinboard.process.lines.filter((line) => line.includes('"pinboard stopped"'))).toEqual([])

    const releasedAt = performance.now()
    await release(worker, held)
    expect((await held.outcome).body).toBe("held\nreleased\n")
    const tunnelClosedAt = await tunnel.closed
    expect(tunnelClosedAt).toBeGreaterThan(releasedAt)
    // Closed once the forward was done, not when the grace period ran out.
    expect(tunnelClosedAt - signalled).toBeLessThan(LONG_GRACE_MS)
    expect(await pinboard.process.exited).toEqual({ code: 0, signal: null })
    await expect(fetch(`${pinboard.url}/readyz`)).rejects.toThrow()
    expect(JSON.parse(pinboard.process.lines.at(-1)!)).toMatchObject({ level: "info", message: "pinboard stopped" })
  })

  it("cuts a forward that outlasts shutdown.graceMs, and still exits 0", async () => {
    const graceMs = 500
    const { pinboard } = await start(graceMs)
    const held = await holdOpen(pinboard)
    const signalled = performance.now()
    process.kill(pinboard.pid, "SIGTERM")
    const outcome = await held.outcome
    expect(outcome.body).toBe("cut")
    // Not before the grace: the process got the signal after `signalled`, and timers never fire early.
    expect(outcome.at - signalled).toBeGreaterThanOrEqual(graceMs)
    expect(await pinboard.process.exited).toEqual({ code: 0, signal: null })
  })

  it("answers /readyz 503 while draining", async () => {
    const { pinboard, worker } = await start(LONG_GRACE_MS)
    // Keep the process draining with a held forward, and ask /readyz on a connection opened before.
    const held = await holdOpen(pinboard)
    const agentSocket = net.connect(pinboard.port, "127.0.0.1")
    await new Promise((resolve) => agentSocket.once("connect", resolve))
    process.kill(pinboard.pid, "SIGTERM")
    await untilRefused(pinboard)
    const reply = await new Promise<string>((resolve) => {
      let text = ""
      agentSocket.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")))
      agentSocket.on("close", () => resolve(text))
      agentSocket.on("error", () => resolve(text))
      agentSocket.write("GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    })
    expect(reply).toMatch(/^HTTP\/1\.1 503 /)
    expect(reply).toContain('{"error":"not ready","reason":"shutting down"}')
    expect(pinboard.process.exit).toBeUndefined()
    await release(worker, held)
    expect((await held.outcome).body).toBe("held\nreleased\n")
    expect(await pinboard.process.exited).toEqual({ code: 0, signal: null })
  })

  describe("with a drain delay (shutdown.drainDelayMs)", () => {
    const readyStatus = async (pinboard: Pinboard) => (await request(pinboard, "/readyz", { headers: [["Connection", "close"]] })).status

    it("answers /readyz 503 at once and still serves new connections for the delay, then drains and exits 0", async () => {
      const delayMs = scaled(3000)
      const { pinboard } = await start(LONG_GRACE_MS, delayMs)
      expect(await readyStatus(pinboard)).toBe(200)
      const signalled = performance.now()
      process.kill(pinboard.pid, "SIGTERM")
      await poll(async () => (await readyStatus(pinboard)) === 503, { timeoutMs: 2_000, reason: "/readyz to turn 503" })
      const line = JSON.parse((await pinboard.process.waitForLine(/"message":"pinboard not ready, still serving"/, 2_000)).input!)
      expect(line).toMatchObject({ level: "info", drain_delay_ms: delayMs })
      // A new connection, a new id: placed and forwarded while the balancer still sends traffic here.
      const served = await request(pinboard, `/threads/${uid("t")}/echo`, { headers: [["Connection", "close"]] })
      expect(served.status).toBe(200)
      expect(performance.now() - signalled).toBeLessThan(delayMs)
      expect(pinboard.process.lines.filter((each) => each.includes('"pinboard draining"'))).toEqual([])
      await untilRefused(pinboard)
      expect(performance.now() - signalled).toBeGreaterThanOrEqual(delayMs)
      expect(await pinboard.process.exited).toEqual({ code: 0, signal: null })
    })

    it("a second SIGTERM ends the delay at once", async () => {
      const { pinboard } = await start(LONG_GRACE_MS, 600_000)
      process.kill(pinboard.pid, "SIGTERM")
      await pinboard.process.waitForLine(/"message":"pinboard not ready, still serving"/, 5_000)
      const second = performance.now()
      process.kill(pinboard.pid, "SIGTERM")
      expect(await within(pinboard.process.exited, 10_000, "the exit after the second signal")).toEqual({ code: 0, signal: null })
      expect(performance.now() - second).toBeLessThan(scaled(10_000))
    })
  })
})
