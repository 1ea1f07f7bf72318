// The worker library in hostname-aware mode (docs/config.md, docs/proxy.md "Hostname-aware mode", docs/worker.md), on TestClock with a registry the
// test plays and a stand-in for Pinboard that records what reaches it: activations are per
// (env, namespace, id), the attested env and hostname reach the instance, releases and
// wind-downs name the env, calls carry the env in `Pinboard-Caller` and go to a hostname, and
// the registration names every (namespace, hostname, env).
import http from "node:http"
import type { AddressInfo } from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import { jwtVerify } from "jose"
import { makeAttestationSigner, type AttestationClaims } from "../../src/auth/Attestation.js"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import { defineInstance, type DeactivateReason } from "../../src/worker/Definition.js"
import { httpRegistryClient, type RegistryClient, type WindDownEntry } from "../../src/worker/RegistryClient.js"
import { makeWorker } from "../../src/worker/Worker.js"
import { flush, until } from "../support/Turns.js"

const TOKEN = "hostname-worker-test-token"
const WORKER = "w1"
const LEASE_MS = 3000
const IDLE_MS = 10_000
const key = attestationKey(TOKEN)
const sign = makeAttestationSigner({ alg: "HS256", secret: key })

/** A clock step, and what it woke run to its next wait. */
const advance = (ms: number) => Effect.andThen(TestClock.adjust(ms), flush)

interface Seen {
  readonly method: string
  readonly url: string
  readonly host: string | undefined
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

/** A stand-in for Pinboard: answers every request 200 `{"ok":true}` and records it. */
const standIn = Effect.acquireRelease(
  Effect.callback<{ url: string; seen: Array<Seen>; server: http.Server }>((resume) => {
    const seen: Array<Seen> = []
    const server = http.createServer((req, res) => {
      let body = ""
      req.on("data", (chunk: Buffer) => (body += chunk.toString()))
      req.on("end", () => {
        seen.push({ method: req.method!, url: req.url!, host: req.headers.host, headers: req.headers, body })
        res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}')
      })
    })
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server })))
  }),
  ({ server }) =>
    Effect.callback<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
)

const fakeRegistry = () => {
  const log: Array<string> = []
  const state = { windDown: [] as Array<WindDownEntry> }
  const client: RegistryClient = {
    register: async () => ({ incarnation: "inc-1", leaseMs: LEASE_MS, heartbeatMs: LEASE_MS / 3, unrenewed: [] }),
    heartbeat: async () => ({ _tag: "Renewed", windDown: state.windDown, unrenewed: [] }),
    release: async ({ env, namespace, id }, epoch) => {
      log.push(`release ${env} ${namespace}/${id}@${epoch}`)
      return true
    },
    deregister: async () => {}
  }
  return { client, log, state }
}

const counterWorld = () => {
  const events: Array<string> = []
  const counter = defineInstance({
    activate: (ctx) => {
      events.push(`activate ${ctx.env} ${ctx.id}@${ctx.epoch}`)
      return { count: 0 }
    },
    deactivate: (_state, reason: DeactivateReason, ctx) => void events.push(`deactivate ${ctx.env} ${ctx.id}@${ctx.epoch} ${reason}`),
    routes: {
      "POST /increment": (request, res) => {
        request.state.count++
        res.end(String(request.state.count))
      },
      "GET /who": (request, res) => {
        res.end(JSON.stringify({ env: request.activation.env, hostname: request.hostname, activatedThrough: request.activation.hostname }))
      },
      "POST /call": async (request, res) => {
        const hostname = request.query.get("hostname")
        const on = request.query.get("on") === "activation" ? request.activation.call : request.call
        const answer = await on("/counters", "callee", "/x", hostname === null ? {} : { hostname })
        res.end(String(answer.status))
      }
    },
    idleTimeoutMs: IDLE_MS
  })
  return { events, counter }
}

const claims = (id: string, epoch: string, env: string, host: string): AttestationClaims => ({
  worker: WORKER,
  namespace: "/counters",
  id,
  epoch,
  depth: 2,
  principal: undefined,
  caller: undefined,
  hostname: { env, host }
})

const setup = Effect.gen(function* () {
  const pinboard = yield* standIn
  const registry = fakeRegistry()
  const world = counterWorld()
  const worker = yield* makeWorker({
    pinboard: pinboard.url,
    token: TOKEN,
    worker: WORKER,
    instances: { "/counters": world.counter },
    hostnames: [
      { hostname: "a.example", env: "prod" },
      { hostname: "b.example", env: "staging" }
    ],
    registry: registry.client,
    log: () => {}
  })
  yield* worker.registered
  const send = (path: string, attestation: AttestationClaims, method = "POST") =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      return yield* Effect.promise(async () => {
        const response = await fetch(`${worker.url}${path}`, { method, headers: { "pinboard-attestation": sign(attestation, now) } })
        return { status: response.status, text: await response.text() }
      })
    })
  return { pinboard, registry, worker, send, ...world }
})

describe("the worker library in hostname-aware mode", () => {
  it.effect("keeps one activation per (env, namespace, id), and shows the instance its env and hostname", () =>
    Effect.gen(function* () {
      const { send, events, worker } = yield* setup
      expect((yield* send("/counters/c1/increment", claims("c1", "5", "prod", "a.example"))).text).toBe("1")
      expect((yield* send("/counters/c1/increment", claims("c1", "5", "prod", "a.example"))).text).toBe("2")
      // The same id in another env is another placement: its own activation, its own state.
      expect((yield* send("/counters/c1/increment", claims("c1", "7", "staging", "b.example"))).text).toBe("1")
      expect(events).toEqual(["activate prod c1@5", "activate staging c1@7"])
      expect(worker.activations.find("/counters", "c1", "prod")?.epoch).toBe("5")
      expect(worker.activations.find("/counters", "c1", "staging")?.epoch).toBe("7")
      expect(worker.activations.find("/counters", "c1")).toBeUndefined()
      // A second hostname of the same env reaches the same activation.
      const who = yield* send("/counters/c1/who", claims("c1", "5", "prod", "c.example"), "GET")
      expect(JSON.parse(who.text)).toEqual({ env: "prod", hostname: "c.example", activatedThrough: "a.example" })
      // A newer epoch replaces only its own env's activation.
      expect((yield* send("/counters/c1/increment", claims("c1", "9", "staging", "b.example"))).text).toBe("1")
      expect(events.slice(2)).toEqual(["deactivate staging c1@7 replaced", "activate staging c1@9"])
      expect((yield* send("/counters/c1/increment", claims("c1", "5", "prod", "a.example"))).text).toBe("3")
    })
  )

  it.effect("releases on idle eviction at the placement's env and epoch", () =>
    Effect.gen(function* () {
      const { send, registry } = yield* setup
      yield* send("/counters/c1/increment", claims("c1", "5", "prod", "a.example"))
      yield* send("/counters/c1/increment", claims("c1", "3", "staging", "b.example"))
      yield* advance(IDLE_MS)
      yield* until(() => registry.log.length === 2, "both releases after idle eviction")
      expect(registry.log.sort()).toEqual(["release prod /counters/c1@5", "release staging /counters/c1@3"])
      // An epoch at or below the one released is refused, in that env only.
      expect((yield* send("/counters/c1/increment", claims("c1", "4", "prod", "a.example"))).status).toBe(503)
      expect((yield* send("/counters/c1/increment", claims("c1", "4", "staging", "b.example"))).status).toBe(200)
    })
  )

  it.effect("winds down the placement of the env the heartbeat names, and releases it there", () =>
    Effect.gen(function* () {
      const { send, events, registry } = yield* setup
      yield* send("/counters/c1/increment", claims("c1", "5", "prod", "a.example"))
      yield* send("/counters/c1/increment", claims("c1", "5", "staging", "b.example"))
      const now = yield* Clock.currentTimeMillis
      registry.state.windDown = [{ env: "staging", namespace: "/counters", id: "c1", epoch: "5", deadline: now + LEASE_MS }]
      yield* advance(LEASE_MS / 3)
      yield* advance(LEASE_MS)
      yield* until(() => registry.log.length > 0, "the release at the end of the wind-down")
      expect(events).toContain("deactivate staging c1@5 wind-down")
      expect(events).not.toContain("deactivate prod c1@5 wind-down")
      expect(registry.log).toEqual(["release staging /counters/c1@5"])
      expect((yield* send("/counters/c1/increment", claims("c1", "5", "prod", "a.example"))).text).toBe("2")
    })
  )

  it.effect("calls carry the env in Pinboard-Caller and go to the request's hostname unless told another", () =>
    Effect.gen(function* () {
      const { send, pinboard } = yield* setup
      // Activated through a.example; this request comes through c.example.
      yield* send("/counters/c1/increment", claims("c1", "5", "prod", "a.example"))
      expect((yield* send("/counters/c1/call", claims("c1", "5", "prod", "c.example"))).text).toBe("200")
      expect((yield* send("/counters/c1/call?hostname=d.example", claims("c1", "5", "prod", "c.example"))).text).toBe("200")
      expect((yield* send("/counters/c1/call?on=activation", claims("c1", "5", "prod", "c.example"))).text).toBe("200")
      expect(pinboard.seen.map((s) => `${s.host} ${s.url}`)).toEqual([
        "c.example /counters/callee/x",
        "d.example /counters/callee/x",
        "a.example /counters/callee/x"
      ])
      const now = yield* Clock.currentTimeMillis
      const tokens = yield* Effect.promise(() =>
        Promise.all(pinboard.seen.map((s) => jwtVerify(String(s.headers["pinboard-caller"]), key, { audience: "pinboard", currentDate: new Date(now) })))
      )
      expect(tokens.map(({ payload }) => [payload.iss, payload.sub, payload.env, payload.epoch, payload.depth])).toEqual([
        [WORKER, "/counters/c1", "prod", "5", 2],
        [WORKER, "/counters/c1", "prod", "5", 2],
        [WORKER, "/counters/c1", "prod", "5", 0]
      ])
    })
  )
})

describe("the registry client in hostname-aware mode", () => {
  it.effect("registers every namespace for each hostname with its env and the registration epoch; releases name the env", () =>
    Effect.gen(function* () {
      const pinboard = yield* standIn
      const client = httpRegistryClient({
        pinboard: pinboard.url,
        token: TOKEN,
        worker: WORKER,
        advertiseUrl: "http://127.0.0.1:9",
        namespaces: ["/counters", "/rooms"],
        hostnames: [
          { hostname: "a.example", env: "prod" },
          { hostname: "b.example", env: "staging" }
        ],
        registrationEpoch: "42"
      })
      // The stand-in's answer is not a registration; only the body sent matters here.
      yield* Effect.promise(() => client.register({ headroom: 3, draining: false }).catch(() => undefined))
      yield* Effect.promise(() => client.release({ env: "prod", namespace: "/counters", id: "c1" }, "5").catch(() => undefined))
      yield* Effect.promise(() => client.release({ env: "", namespace: "/counters", id: "c1" }, "6").catch(() => undefined))
      expect(pinboard.seen.map((s) => [s.method, s.url, JSON.parse(s.body)])).toEqual([
        [
          "POST",
          "/registry/workers",
          {
            worker: WORKER,
            advertiseUrl: "http://127.0.0.1:9",
            namespaces: [
              { namespace: "/counters", hostname: "a.example", env: "prod" },
              { namespace: "/counters", hostname: "b.example", env: "staging" },
              { namespace: "/rooms", hostname: "a.example", env: "prod" },
              { namespace: "/rooms", hostname: "b.example", env: "staging" }
            ],
            headroom: 3,
            draining: false,
            epoch: "42"
          }
        ],
        ["POST", "/registry/release", { namespace: "/counters", id: "c1", epoch: "5", env: "prod" }],
        ["POST", "/registry/release", { namespace: "/counters", id: "c1", epoch: "6" }]
      ])
    })
  )
})
