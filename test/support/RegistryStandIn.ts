// A node:http server playing Pinboard for the worker library's tests: the registry API of
// docs/registry-api.md as far as a worker calls it (register, heartbeat, release, deregister,
// `GET /registry/keys` with attestation keys, a register answer's `callerKey`), and anything
// else (an instance call) answered 200. It records every request with its `Authorization`,
// and answers what the test sets in `state`.
import { randomBytes } from "node:crypto"
import http from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"
import type { JWK } from "jose"

export interface StandInRequest {
  readonly method: string
  readonly path: string
  readonly authorization: string | undefined
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

export interface StandInState {
  /** What `GET /registry/keys` answers. */
  keys: Array<JWK>
  /** With attestation keys, a register answer carries a fresh `callerKey`. */
  callerKeys: boolean
  /** A refusal answered to every register instead of a registration (`403 {"error": ...}`). */
  registerRefusal: string | undefined
  /** The next heartbeat answers `410 lease lost`. */
  loseLease: boolean
}

export interface StandInRegistration {
  readonly incarnation: string
  readonly callerKey: string | undefined
}

export interface RegistryStandIn {
  readonly url: string
  readonly seen: Array<StandInRequest>
  readonly registrations: Array<StandInRegistration>
  readonly state: StandInState
  /** How many requests were `method path`. */
  readonly count: (method: string, path: string) => number
}

const json = (res: http.ServerResponse, status: number, body: unknown) =>
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body))

export const registryStandIn = (leaseMs: number) =>
  Effect.acquireRelease(
    Effect.callback<{ standIn: RegistryStandIn; server: http.Server }>((resume) => {
      const seen: Array<StandInRequest> = []
      const registrations: Array<StandInRegistration> = []
      const state: StandInState = { keys: [], callerKeys: false, registerRefusal: undefined, loseLease: false }
      const answer = (req: http.IncomingMessage, res: http.ServerResponse, path: string) => {
        if (req.method === "GET" && path === "/registry/keys") return json(res, 200, { keys: state.keys })
        if (req.method === "POST" && path === "/registry/workers") {
          if (state.registerRefusal !== undefined) return json(res, 403, { error: state.registerRefusal })
          const registration = {
            incarnation: `inc-${registrations.length + 1}`,
            callerKey: state.callerKeys ? randomBytes(32).toString("base64url") : undefined
          }
          registrations.push(registration)
          const { incarnation, callerKey } = registration
          return json(res, 200, { worker: "w1", incarnation, leaseMs, heartbeatMs: leaseMs / 3, leaseExpiresAt: 0, ...(callerKey === undefined ? {} : { callerKey }) })
        }
        if (req.method === "POST" && path.endsWith("/heartbeat")) {
          if (state.loseLease) {
            state.loseLease = false
            return json(res, 410, { error: "lease lost" })
          }
          return json(res, 200, { leaseExpiresAt: 0, windDown: [] })
        }
        if (req.method === "DELETE") return res.writeHead(204).end()
        if (path === "/registry/release") return json(res, 200, { released: true })
        return json(res, 200, { ok: true })
      }
      const server = http.createServer((req, res) => {
        let body = ""
        req.on("data", (chunk: Buffer) => (body += chunk.toString()))
        req.on("end", () => {
          const path = (req.url ?? "/").split("?")[0]!
          seen.push({ method: req.method!, path, authorization: req.headers.authorization, headers: req.headers, body })
          answer(req, res, path)
        })
      })
      const count = (method: string, path: string) => seen.filter((r) => r.method === method && r.path === path).length
      server.listen(0, "127.0.0.1", () =>
        resume(Effect.succeed({ standIn: { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, registrations, state, count }, server }))
      )
    }),
    ({ server }) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ standIn }) => standIn))
