// The assembled worker on TestClock, with a registry the test plays and real HTTP and
// WebSocket clients (docs/worker.md): attestation required, one activation per id, routes and
// request identity, idle eviction with release at the epoch, background tasks, replacement
// by a newer epoch, refusal while the lease is unhealthy, and a graceful stop. Every wait
// (registration retries, heartbeats, wind-down budgets, the stop's grace) moves with TestClock.
import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Fiber, Scope } from "effect"
import { TestClock } from "effect/testing"
import WebSocket from "ws"
import { makeAttestationSigner, type AttestationClaims } from "../../src/auth/Attestation.js"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import { RELEASED_MEMORY_MS } from "../../src/worker/Activations.js"
import { defineInstance, type DeactivateReason } from "../../src/worker/Definition.js"
import type { RegistryClient, WindDownEntry, WorkerStatus } from "../../src/worker/RegistryClient.js"
import { WIND_DOWN_MARGIN_MS } from "../../src/worker/WindDown.js"
import { DEFAULT_SHUTDOWN_GRACE_MS, makeWorker, type RunningWorker } from "../../src/worker/Worker.js"
import { quietWindow, scaled } from "../support/Time.js"
import { flush, until } from "../support/Turns.js"

const TOKEN = "worker-test-token"
const WORKER = "w1"
const LEASE_MS = 3000
const IDLE_MS = 10_000
const sign = makeAttestationSigner({ alg: "HS256", secret: attestationKey(TOKEN) })

/** A clock step, and what it woke run to its next wait. */
const advance = (ms: number) => Effect.andThen(TestClock.adjust(ms), flush)

const fakeRegistry = () => {
  const log: Array<string> = []
  const state = { register: "ok" as "ok" | "fail", heartbeat: "ok" as "ok" | "fail", windDown: [] as Array<WindDownEntry> }
  const heartbeats: Array<WorkerStatus> = []
  const client: RegistryClient = {
    register: async () => {
      if (state.register === "fail") {
        log.push("register failed")
        throw new Error("unreachable")
      }
      log.push("registered")
      return { incarnation: "inc-1", leaseMs: LEASE_MS, heartbeatMs: LEASE_MS / 3, unrenewed: [] }
    },
    heartbeat: async (_incarnation, status) => {
      heartbeats.push(status)
      if (state.heartbeat === "fail") throw new Error("unreachable")
      return { _tag: "Renewed", windDown: state.windDown, unrenewed: [] }
    },
    release: async ({ namespace, id }, epoch) => {
      log.push(`release ${namespace}/${id}@${epoch}`)
      return true
    },
    deregister: async (incarnation) => void log.push(`deregister ${incarnation}`)
  }
  return { client, log, state, heartbeats }
}

/** A counter instance that records its lifecycle. */
const counterWorld = () => {
  const events: Array<string> = []
  const counter = defineInstance({
    activate: (ctx) => {
      events.push(`activate ${ctx.id}@${ctx.epoch}`)
      return { count: 0, ctx }
    },
    deactivate: (_state, reason: DeactivateReason, ctx) => void events.push(`deactivate ${ctx.id}@${ctx.epoch} ${reason}`),
    routes: {
      "POST /increment": (request, res) => {
        request.state.count++
        res.end(String(request.state.count))
      },
      "GET /who": (request, res) => {
        res.setHeader("content-type", "application/json")
        res.end(JSON.stringify({ depth: request.depth, subject: request.subject, scopes: request.scopes, caller: request.caller, path: request.path, q: request.query.get("q") }))
      },
      "POST /background": (request, res) => {
        request.activation.background(
          (signal) =>
            new Promise<void>((resolve) => {
              signal.addEventListener("abort", () => {
                events.push(`background ${request.activation.id} aborted`)
                resolve()
              })
            })
        )
        res.end("started")
      }
    },
    webSocket: (socket) => socket.on("message", (data) => socket.send(data)),
    // A wind-down that never finishes by itself: only its budget ends it.
    windDown: (_state, deadline, ctx) => {
      events.push(`wind-down ${ctx.id}@${ctx.epoch} until ${deadline.getTime()}`)
      return new Promise(() => {})
    },
    idleTimeoutMs: IDLE_MS
  })
  return { events, counter }
}

/** A request that stays in progress: its handler never answers. */
const hangingRoute = defineInstance({ activate: () => ({}), routes: { "POST /hang": () => new Promise(() => {}) } })

const claims = (id: string, epoch: string, overrides: Partial<AttestationClaims> = {}): AttestationClaims => ({
  worker: WORKER,
  namespace: "/counters",
  id,
  epoch,
  depth: 0,
  principal: undefined,
  caller: undefined,
  ...overrides
})

/** The worker on TestClock, with the registry the test plays, and a client sending attested requests. */
const setupWith = (registry: ReturnType<typeof fakeRegistry>) =>
  Effect.gen(function* () {
    const world = counterWorld()
    const worker: RunningWorker = yield* makeWorker({
      pinboard: "http://127.0.0.1:1",
      token: TOKEN,
      worker: WORKER,
      instances: { "/counters": world.counter, "/hanging": hangingRoute },
      registry: registry.client,
      log: () => {}
    })
    yield* until(() => registry.log.some((line) => line.startsWith("register")), "the first registration attempt")
    yield* flush
    const send = (path: string, attestation: AttestationClaims | string | undefined, method = "POST") =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const headers: Record<string, string> = {}
        if (attestation !== undefined) headers["pinboard-attestation"] = typeof attestation === "string" ? attestation : sign(attestation, now)
        return yield* Effect.promise(async () => {
          const response = await fetch(`${worker.url}${path}`, { method, headers })
          return { status: response.status, headers: response.headers, text: await response.text() }
        })
      })
    return { registry, worker, send, ...world }
  })

const setup = Effect.suspend(() => setupWith(fakeRegistry()))

/**
 * `effect` on the test's Clock, with the instant each sleep it starts ends at recorded in
 * `wakeups` (TestClock keeps its pending sleeps to itself).
 */
const recordingWakeups = <A extends object, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const clock = yield* Clock.Clock
    const wakeups: Array<number> = []
    const recording: Clock.Clock = {
      ...clock,
      sleep: (duration) =>
        Effect.suspend(() => {
          wakeups.push(clock.currentTimeMillisUnsafe() + Duration.toMillis(duration))
          return clock.sleep(duration)
        })
    }
    return { ...(yield* Effect.provideService(effect, Clock.Clock, recording)), wakeups }
  })

describe("the worker's request handler", () => {
  it.effect("401 for anything that did not come through Pinboard", () =>
    Effect.gen(function* () {
      const { send, events } = yield* setup
      expect((yield* send("/counters/c1/increment", undefined)).status).toBe(401)
      expect((yield* send("/counters/c1/increment", "not.a.token")).status).toBe(401)
      expect((yield* send("/counters/c1/increment", claims("c1", "1", { worker: "w2" }))).status).toBe(401)
      const forged = makeAttestationSigner({ alg: "HS256", secret: attestationKey("another-token") })(claims("c1", "1"), 0)
      expect((yield* send("/counters/c1/increment", forged)).status).toBe(401)
      expect(events).toEqual([])
    })
  )

  it.effect("one activation per id: state kept across requests; routes get the attested identity", () =>
    Effect.gen(function* () {
      const { send, events } = yield* setup
      expect((yield* send("/counters/c1/increment", claims("c1", "5"))).text).toBe("1")
      expect((yield* send("/counters/c1/increment", claims("c1", "5"))).text).toBe("2")
      expect((yield* send("/counters/c2/increment", claims("c2", "6"))).text).toBe("1")
      expect(events).toEqual(["activate c1@5", "activate c2@6"])
      const who = yield* send(
        "/counters/c1/who?q=yes",
        claims("c1", "5", { depth: 3, principal: { subject: "alice", scopes: ["a", "b"] }, caller: "/rooms/r1" }),
        "GET"
      )
      expect(JSON.parse(who.text)).toEqual({ depth: 3, subject: "alice", scopes: ["a", "b"], caller: "/rooms/r1", path: "/who", q: "yes" })
      expect((yield* send("/counters/c1/nothing", claims("c1", "5"))).status).toBe(404)
      expect((yield* send("/other/c1/increment", claims("c1", "5", { namespace: "/other" }))).status).toBe(404)
    })
  )

  it.effect("idle eviction after idleTimeoutMs releases the placement at its epoch", () =>
    Effect.gen(function* () {
      const { send, events, registry } = yield* setup
      yield* send("/counters/c1/increment", claims("c1", "5"))
      yield* advance(IDLE_MS - 1000)
      expect(events).toEqual(["activate c1@5"])
      yield* advance(1000)
      yield* until(() => registry.log.includes("release /counters/c1@5"), "the release after idle eviction")
      expect(events).toEqual(["activate c1@5", "deactivate c1@5 idle"])
      // A request sent at the released epoch is refused, so that Pinboard places the id anew;
      // at the new placement's epoch it activates afresh.
      const stale = yield* send("/counters/c1/increment", claims("c1", "5"))
      expect(stale.status).toBe(503)
      expect(stale.headers.get("pinned-refusal")).toBe("lease-unhealthy")
      expect(JSON.parse(stale.text)).toEqual({ error: "placement released" })
      expect((yield* send("/counters/c1/increment", claims("c1", "6"))).text).toBe("1")
    })
  )

  it.effect("a released epoch is remembered only while an attestation for it could still be valid", () =>
    Effect.gen(function* () {
      const { send, worker } = yield* setup
      yield* send("/counters/c1/increment", claims("c1", "5"))
      yield* advance(IDLE_MS)
      expect((yield* send("/counters/c1/increment", claims("c1", "5"))).status).toBe(503)
      yield* advance(RELEASED_MEMORY_MS)
      // Memory stays bounded: past every attestation's life, the entry is gone.
      expect((yield* send("/counters/c1/increment", claims("c1", "5"))).status).toBe(200)
      expect(worker.activations.size).toBe(1)
    })
  )

  it.effect("an idle worker's heartbeat reports its free activation slots as headroom, exactly", () =>
    Effect.gen(function* () {
      const { send, registry } = yield* setup
      for (let n = 1; n <= 6; n++) expect((yield* send(`/counters/c${n}/increment`, claims(`c${n}`, "5"))).status).toBe(200)
      // Real time with nothing to do: the event loop idles, and that is what the headroom measures.
      // A heartbeat after each idle window, until one reports the free slots (a busy machine can
      // deschedule the process for a window); before the mend, none did.
      const deadline = performance.now() + scaled(3000)
      do {
        yield* Effect.promise(() => quietWindow(100))
        const sent = registry.heartbeats.length
        yield* advance(LEASE_MS / 3)
        yield* until(() => registry.heartbeats.length > sent, "the next heartbeat")
      } while (registry.heartbeats.at(-1)!.headroom !== 1000 - 6 && performance.now() < deadline)
      expect(registry.heartbeats.at(-1)).toEqual({ headroom: 1000 - 6, draining: false })
    })
  )

  it.effect("a background task keeps its activation from idle eviction, and is aborted at teardown", () =>
    Effect.gen(function* () {
      const { send, events, worker } = yield* setup
      yield* send("/counters/c1/background", claims("c1", "5"))
      yield* advance(3 * IDLE_MS)
      expect(events).toEqual(["activate c1@5"])
      yield* Effect.promise(() => worker.activations.dropAll("shutdown"))
      expect(events).toEqual(["activate c1@5", "background c1 aborted", "deactivate c1@5 shutdown"])
    })
  )

  it.effect("a newer epoch replaces the activation; an older one is served by the current", () =>
    Effect.gen(function* () {
      const { send, events } = yield* setup
      yield* send("/counters/c1/increment", claims("c1", "5"))
      expect((yield* send("/counters/c1/increment", claims("c1", "10"))).text).toBe("1")
      expect(events).toEqual(["activate c1@5", "deactivate c1@5 replaced", "activate c1@10"])
      expect((yield* send("/counters/c1/increment", claims("c1", "9"))).text).toBe("2")
    })
  )

  it.effect("a wind-down hook gets until the deadline less the margin, on the Clock; then the placement is released", () =>
    Effect.gen(function* () {
      const { send, events, registry } = yield* setup
      yield* send("/counters/c1/increment", claims("c1", "5"))
      const deadline = (yield* Clock.currentTimeMillis) + 3 * LEASE_MS
      registry.state.windDown = [{ env: "", namespace: "/counters", id: "c1", epoch: "5", deadline }]
      // The next heartbeat (one interval on) lists it: the hook starts, and its budget with it.
      yield* advance(LEASE_MS / 3)
      registry.state.windDown = []
      yield* until(() => events.includes(`wind-down c1@5 until ${deadline}`), "the wind-down hook")
      const budget = deadline - (yield* Clock.currentTimeMillis) - WIND_DOWN_MARGIN_MS
      yield* advance(budget - 100)
      expect(events).not.toContain("deactivate c1@5 wind-down")
      expect(registry.log).not.toContain("release /counters/c1@5")
      yield* advance(100)
      yield* until(() => registry.log.includes("release /counters/c1@5"), "the release at the end of the wind-down budget")
      expect(events).toContain("deactivate c1@5 wind-down")
    })
  )

  it.effect("lease unhealthy: every activation dropped; new ones refused with 503 Pinned-Refusal", () =>
    Effect.gen(function* () {
      const { send, events, registry, worker } = yield* setup
      yield* send("/counters/c1/increment", claims("c1", "5"))
      registry.state.heartbeat = "fail"
      yield* advance(LEASE_MS - LEASE_MS / 5)
      yield* until(() => !worker.healthy(), "the lease to turn unhealthy")
      expect(events).toContain("deactivate c1@5 lease-unhealthy")
      const refused = yield* send("/counters/c1/increment", claims("c1", "5"))
      expect(refused.status).toBe(503)
      expect(refused.headers.get("pinned-refusal")).toBe("lease-unhealthy")
      registry.state.heartbeat = "ok"
      yield* advance(2000)
      yield* until(() => worker.healthy(), "the lease to turn healthy again")
      expect((yield* send("/counters/c1/increment", claims("c1", "5"))).status).toBe(200)
    })
  )

  it.effect("an open WebSocket counts as use; teardown closes it with 1012", () =>
    Effect.gen(function* () {
      const { events, worker } = yield* setup
      const now = yield* Clock.currentTimeMillis
      const socket = new WebSocket(`${worker.url.replace("http", "ws")}/counters/c9/ws`, {
        headers: { "pinboard-attestation": sign(claims("c9", "2"), now) }
      })
      yield* Effect.promise(() => new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject)))
      const echoed = yield* Effect.promise(
        () => new Promise<string>((resolve) => (socket.once("message", (data) => resolve(String(data))), socket.send("hi")))
      )
      expect(echoed).toBe("hi")
      yield* advance(3 * IDLE_MS)
      expect(events).toEqual(["activate c9@2"])
      const closed = Effect.promise(() => new Promise<number>((resolve) => socket.once("close", (code) => resolve(code))))
      yield* Effect.promise(() => worker.activations.dropAll("shutdown"))
      expect(yield* closed).toBe(1012)
    })
  )

  it.effect("stop: deactivates everything, then deregisters", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const { send, events, registry } = yield* Scope.provide(setup, scope)
      yield* send("/counters/c1/increment", claims("c1", "5"))
      yield* Scope.close(scope, Exit.void)
      expect(events).toEqual(["activate c1@5", "deactivate c1@5 shutdown"])
      expect(registry.log.at(-1)).toBe("deregister inc-1")
    })
  )

  it.effect("stop waits for a request in progress until shutdownGraceMs have passed on the Clock", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const { registry, worker, wakeups } = yield* Scope.provide(recordingWakeups(setup), scope)
      const attestation = sign(claims("h1", "3", { namespace: "/hanging" }), yield* Clock.currentTimeMillis)
      const hanging = fetch(`${worker.url}/hanging/h1/hang`, { method: "POST", headers: { "pinboard-attestation": attestation } }).then(
        (response) => response.status,
        () => "cut"
      )
      yield* until(() => worker.activations.find("/hanging", "h1") !== undefined, "the hanging request's activation")
      const stoppingAt = yield* Clock.currentTimeMillis
      const stopping = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      // The grace starts once the server no longer listens: its timer is then on the Clock.
      yield* until(() => wakeups.includes(stoppingAt + DEFAULT_SHUTDOWN_GRACE_MS), "the stop's grace timer")
      expect(worker.server.listening).toBe(false)
      yield* advance(DEFAULT_SHUTDOWN_GRACE_MS - 1)
      expect(worker.activations.size).toBe(1)
      expect(registry.log).not.toContain("deregister inc-1")
      yield* advance(1)
      // At once: the grace ended on the Clock, not on a timer of its own.
      yield* until(() => worker.activations.size === 0, "the activations dropped at the end of the grace")
      yield* Fiber.join(stopping)
      expect(registry.log.at(-1)).toBe("deregister inc-1")
      expect(yield* Effect.promise(() => hanging)).toBe("cut")
    })
  )

  it.effect("registered completes once a registration gets through; the retries wait on the Clock", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      registry.state.register = "fail"
      const { worker } = yield* setupWith(registry)
      const registered = yield* Effect.forkChild(worker.registered)
      // Retried after 100 ms, then twice as long each time, 2 s apart at most: one retry per advance.
      const failures = () => registry.log.filter((line) => line === "register failed").length
      for (const [retry, waitMs] of [100, 200, 400, 800, 1600, 2000, 2000].entries()) {
        yield* advance(waitMs - 1)
        expect(failures()).toBe(retry + 1)
        yield* advance(1)
        yield* until(() => failures() === retry + 2, `registration retry ${retry + 1}`)
      }
      expect(failures()).toBe(8)
      registry.state.register = "ok"
      yield* flush
      expect(registered.pollUnsafe()).toBeUndefined()
      expect(worker.healthy()).toBe(false)
      yield* advance(2_000)
      yield* until(() => registered.pollUnsafe() !== undefined, "registered to complete")
      expect(worker.healthy()).toBe(true)
    })
  )
})
