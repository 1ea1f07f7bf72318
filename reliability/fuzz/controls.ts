// Control requests, sent in between the fuzz traffic: well-formed requests whose exact answer
// is known. Any mismatch means the fuzz broke something for well-behaved clients.
import { createHash, randomBytes } from "node:crypto"
import { checkEcho, echoOf, requestBytes, type World } from "./common.js"
import { callerClaims, callerToken, userToken } from "./tokens.js"
import { header, sendHttp, sendRaw, type HttpRequest, type Observation } from "./wire.js"

export interface ControlResult {
  readonly sent: number
  readonly healthChecks: number
  readonly failures: ReadonlyArray<string>
}

const HANG_MS = 10_000

export const runControls = async (world: World, round: number): Promise<ControlResult> => {
  const failures: Array<string> = []
  let sent = 0
  let healthChecks = 0
  const k = round % 8
  const call = async (request: HttpRequest): Promise<Observation> => {
    sent++
    let answer = await sendHttp(world.port, request, HANG_MS)
    if (answer.responses.length === 0 && /socket hang up|ECONNRESET/.test(answer.sendError ?? "")) answer = await sendHttp(world.port, request, HANG_MS, true)
    return answer
  }
  const expectStatus = (what: string, answer: Observation, status: number): boolean => {
    const got = answer.responses[0]
    if (got === undefined) {
      failures.push(`${what}: no answer (${answer.hung ? "hang" : answer.sendError ?? "closed"})`)
      return false
    }
    if (got.status !== status) {
      failures.push(`${what}: ${got.status} ${JSON.stringify(got.body.toString("utf8").slice(0, 200))}, expected ${status}`)
      return false
    }
    return true
  }
  const owner = (namespace: string, id: string) => world.placed.find((p) => p.namespace === namespace && p.id === id)?.worker

  // 1. An open instance: the worker's echo, from the one owner, path byte for byte.
  {
    const id = `ctl-open-${k}`
    const path = `/${"open"}/${id}/echo?round=${round}`
    const answer = await call({ method: "GET", path, headers: [] })
    if (expectStatus(`GET ${path}`, answer, 200)) {
      const problem = checkEcho(answer.responses[0]!, { method: "GET", url: path })
      if (problem !== undefined) failures.push(`GET ${path}: ${problem}`)
      const echo = echoOf(answer.responses[0]!)
      const expected = owner("/open", id)
      if (expected !== undefined && echo?.worker !== expected) failures.push(`GET ${path}: served by ${echo?.worker}, its owner is ${expected}`)
    }
  }
  // 2. A required rule with a valid token: forwarded with the credential unchanged.
  {
    const path = `/auth/ctl-auth-${k}/echo`
    const authorization = `Bearer ${userToken()}`
    const answer = await call({ method: "GET", path, headers: [["Authorization", authorization]] })
    if (expectStatus(`GET ${path} with a token`, answer, 200)) {
      const problem = checkEcho(answer.responses[0]!, { method: "GET", url: path, equal: { authorization } })
      if (problem !== undefined) failures.push(`GET ${path}: ${problem}`)
    }
  }
  // 3. A body, streamed through whole.
  {
    const path = `/open/ctl-open-${k}/upload`
    const body = randomBytes(4096 + round % 1000)
    const answer = await call({ method: "POST", path, headers: [["Content-Type", "application/octet-stream"]], body })
    if (expectStatus(`POST ${path}`, answer, 200)) {
      const problem = checkEcho(answer.responses[0]!, {
        method: "POST",
        url: path,
        bodyBytes: body.length,
        bodySha256: createHash("sha256").update(body).digest("hex")
      })
      if (problem !== undefined) failures.push(`POST ${path}: ${problem}`)
    }
  }
  // 4. An optional rule, with and without its cookie.
  {
    const path = `/opt/ctl-opt-${k}/echo`
    const withCookie = await call({ method: "GET", path, headers: [["Cookie", `session=${userToken()}`]] })
    if (expectStatus(`GET ${path} with a cookie`, withCookie, 200)) {
      const problem = checkEcho(withCookie.responses[0]!, { method: "GET", url: path })
      if (problem !== undefined) failures.push(`GET ${path}: ${problem}`)
    }
    expectStatus(`GET ${path} without a cookie`, await call({ method: "GET", path, headers: [] }), 200)
  }
  // 5. Pinboard's own answers, exactly.
  {
    const exact = async (path: string, headers: Array<[string, string]>, status: number, body: string) => {
      const answer = await call({ method: "GET", path, headers })
      if (expectStatus(`GET ${path}`, answer, status) && answer.responses[0]!.body.toString("utf8") !== body) {
        failures.push(`GET ${path}: body ${JSON.stringify(answer.responses[0]!.body.toString("utf8"))}, expected ${JSON.stringify(body)}`)
      }
    }
    await exact("/open//x", [], 400, "id must be non-empty")
    await exact(`/auth/ctl-auth-${k}/echo`, [], 401, JSON.stringify({ error: "authentication required" }))
    await exact(`/auth/ctl-auth-${k}/echo`, [["Authorization", "Bearer nope"]], 401, JSON.stringify({ error: "invalid credential" }))
    await exact(`/nowhere/x/y`, [["X-Api-Key", "fuzz-api-key-3f9c2b7e1a4d"]], 404, JSON.stringify({ error: "unknown namespace" }))
    await exact("/healthz", [], 200, JSON.stringify({ status: "ok" }))
    healthChecks++
  }
  // 6. A call from an instance: skips the rule, forwarded one level deeper.
  if (round % 5 === 0) {
    const caller = world.placed.find((p) => p.namespace === "/open")
    if (caller !== undefined) {
      const path = `/calls/ctl-calls-${k}/echo`
      const answer = await call({ method: "GET", path, headers: [["Pinboard-Caller", callerToken(callerClaims(caller, { depth: 3 }))]] })
      if (expectStatus(`GET ${path} as ${caller.namespace}/${caller.id}`, answer, 200)) {
        const problem = checkEcho(answer.responses[0]!, { method: "GET", url: path })
        if (problem !== undefined) failures.push(`GET ${path}: ${problem}`)
      }
    }
  }
  // 7. A WebSocket through, echoing, closed cleanly.
  if (round % 5 === 2) {
    sent++
    const message = `control ${round} ${randomBytes(8).toString("hex")}`
    const data = requestBytes({
      method: "GET",
      target: `/open/ctl-open-${k}/ws`,
      headers: [
        ["Host", world.host],
        ["Upgrade", "websocket"],
        ["Connection", "Upgrade"],
        ["Sec-WebSocket-Key", randomBytes(16).toString("base64")],
        ["Sec-WebSocket-Version", "13"]
      ]
    })
    const answer = await sendRaw({ port: world.port, parts: [{ data }], after: { mode: "ws", ws: { message, ending: "close-frame" } }, headRequest: false, finAfterMs: 5000, hangMs: HANG_MS })
    const first = answer.responses[0]
    if (first?.status !== 101 || header(first, "x-worker-upgrade") !== "yes") failures.push(`WebSocket upgrade: ${first?.status ?? "no answer"}`)
    else if (answer.ws?.echo !== message) failures.push(`WebSocket echo: ${JSON.stringify(answer.ws?.echo)}`)
    else if (!answer.ws.closedCleanly) failures.push("WebSocket: no close after the client's close frame")
  }
  return { sent, healthChecks, failures }
}
