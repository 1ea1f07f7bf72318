// What Pinboard writes for errors it did not foresee (docs/errors.md: 500; "WebSockets": a
// 500 destroys the socket without a status line) and for catalogue errors on upgrades.
import http from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, References } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { RegistryColdStart, UnknownNamespace } from "../../src/Errors.js"
import { answerFailure, respond } from "../../src/http/Answer.js"
import { writeBareStatus } from "../../src/http/BareStatus.js"
import { NO_FACTS } from "../../src/observe/Exchange.js"
import { rawExchange } from "../support/Wire.js"

let server: http.Server | undefined
afterEach(() => {
  server?.closeAllConnections()
  server?.close()
})

const serve = async (handler: Effect.Effect<void, UnknownNamespace | RegistryColdStart>): Promise<number> => {
  const quiet = <A, E>(effect: Effect.Effect<A, E>) => Effect.runFork(Effect.provideService(effect, References.MinimumLogLevel, "None"))
  server = http.createServer((req, res) => quiet(respond(req, res, handler)))
  // As the server answers an upgrade's failure: a bare status line (docs/proxy.md "WebSockets").
  server.on("upgrade", (_req, socket) => quiet(Effect.catchCause(handler, (cause) => answerFailure(cause, (reply) => writeBareStatus(socket, reply), NO_FACTS))))
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve))
  return (server.address() as AddressInfo).port
}

const upgrade = "GET /threads/t1 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nOrigin: https://app.example\r\n\r\n"

describe("responses for failures", () => {
  it("a defect: 500 internal error, as JSON", async () => {
    const port = await serve(Effect.die(new Error("boom")))
    const response = await fetch(`http://127.0.0.1:${port}/threads/t1`)
    expect(response.status).toBe(500)
    expect(response.headers.get("content-type")).toBe("application/json")
    expect(await response.text()).toBe('{"error":"internal error"}')
  })

  it("a defect during an upgrade destroys the socket without a status line", async () => {
    const port = await serve(Effect.die(new Error("boom")))
    const reply = await rawExchange(port, upgrade, 2000)
    expect(reply.closed).toBe(true)
    expect(reply.bytes.length).toBe(0)
  })

  it("a catalogue error during an upgrade is a bare status line: no body, no CORS, Retry-After for 503", async () => {
    const port = await serve(new RegistryColdStart({ retryAfterMs: 2_500 }))
    const reply = await rawExchange(port, upgrade, 2000)
    expect(reply.bytes.toString("latin1")).toBe("HTTP/1.1 503 Service Unavailable\r\nretry-after: 3\r\nconnection: close\r\n\r\n")
    expect(reply.closed).toBe(true)
  })

  it("a catalogue error on plain HTTP carries the CORS rule", async () => {
    const port = await serve(new UnknownNamespace())
    const response = await fetch(`http://127.0.0.1:${port}/threads`, { headers: { origin: "https://app.example" } })
    expect(response.status).toBe(404)
    expect(response.headers.get("access-control-allow-origin")).toBe("https://app.example")
    expect(response.headers.get("vary")).toBe("origin")
    expect(await response.text()).toBe('{"error":"unknown namespace"}')
  })
})
