// Hostname-aware mode in the registry (docs/proxy.md "Hostname-aware mode";
// docs/protocol.md "Resolution", docs/proxy.md "Hostname-aware mode"), on both layers under TestClock: per-hostname pools, the 409, takeover
// (wind_down with its heartbeat entry, deadline and early release; deny), rebinding with
// displacement, and the env learnt from the binding.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import { TestClock } from "effect/testing"
import type { NamespaceRegistration, RegistryPolicy } from "../../src/registry/Domain.js"
import type { RegistryBackend } from "../../src/registry/RegistryBackend.js"
import { makeMemoryBackend } from "../../src/registry/Memory.js"
import type { RegistryService } from "../../src/registry/Registry.js"
import { makeRegistry } from "../../src/registry/RegistryOnBackend.js"
import { redisBackend, useRedis } from "../support/RedisBackend.js"

const LEASE = 15_000
const T0 = 1_800_000_000_000
const policy: RegistryPolicy = { leaseMs: LEASE, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: LEASE }
const docs = (hostname: string, env: string): NamespaceRegistration => ({ namespace: "/docs", hostname, env })

const request = (hostname: string, id: string) => ({
  env: "",
  namespace: "/docs",
  id,
  hostname,
  caller: undefined,
  affinity: "10.0.0.1",
  excluded: []
})

const redis = useRedis()
let prefixes = 0
const LAYERS: ReadonlyArray<readonly [string, () => RegistryBackend]> = [
  ["embedded", () => makeMemoryBackend(4, policy)],
  ["redis", () => redisBackend(redis.client, `host${prefixes++}`, 4, policy)]
]

/** Registers workers (worker, its registrations, epoch), keeps them heartbeating, and waits out the cold start. */
const fleetOn = (backend: () => RegistryBackend) => (workers: ReadonlyArray<readonly [string, ReadonlyArray<NamespaceRegistration>, string]>) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(T0)
    // envs.strict.takeover is deny; the other envs wind down (docs/proxy.md "Hostname-aware mode").
    const registry = makeRegistry(backend(), policy, (env) => (env === "strict" ? "deny" : "wind_down"))
    const incarnations = new Map<string, string>()
    for (const [worker, namespaces, epoch] of workers) {
      const answer = yield* registry.register({ worker, advertiseUrl: `http://127.0.0.1:1/${worker}`, namespaces, headroom: 1, draining: false, epoch, callerKey: undefined })
      incarnations.set(worker, answer.incarnation)
    }
    const beat = (worker: string) => registry.heartbeat(worker, { incarnation: incarnations.get(worker)!, headroom: 1, draining: false, degraded: false })
    const beatAll = Effect.suspend(() => Effect.forEach([...incarnations.keys()], beat, { discard: true }))
    /** Moves the clock in steps of a third of a lease, every worker heartbeating after each. */
    const advance = (ms: number): Effect.Effect<void, unknown> =>
      ms <= 0 ? Effect.void : Effect.andThen(Effect.andThen(TestClock.adjust(Math.min(ms, LEASE / 3)), beatAll), Effect.suspend(() => advance(ms - LEASE / 3)))
    /** Registers one more worker, kept heartbeating from now on. */
    const join = (worker: string, namespaces: ReadonlyArray<NamespaceRegistration>, epoch: string) =>
      Effect.map(registry.register({ worker, advertiseUrl: `http://127.0.0.1:1/${worker}`, namespaces, headroom: 1, draining: false, epoch, callerKey: undefined }), (answer) =>
        void incarnations.set(worker, answer.incarnation)
      )
    yield* advance(LEASE)
    return { registry, beat, advance, join }
  })

const refusal = (registry: RegistryService, hostname: string, id: string) =>
  Effect.map(Effect.flip(registry.resolve(request(hostname, id))), (error) => ({
    tag: error._tag,
    retryAfterMs: "retryAfterMs" in error ? error.retryAfterMs : undefined
  }))

describe.each(LAYERS)("hostname-aware mode in the registry (%s)", (_layer, backend) => {
  const fleet = fleetOn(backend)
  it.effect("each hostname's ids go to its own workers; the env comes from the pair's binding", () =>
    Effect.gen(function* () {
      const { registry } = yield* fleet([
        ["wa", [docs("a.example", "prod")], "1"],
        ["wb", [docs("b.example", "prod")], "1"]
      ])
      for (let i = 0; i < 20; i++) {
        const viaA = yield* registry.resolve(request("a.example", `a${i}`))
        const viaB = yield* registry.resolve(request("b.example", `b${i}`))
        expect([viaA.worker, viaA.env, viaB.worker, viaB.env]).toEqual(["wa", "prod", "wb", "prod"])
      }
      expect(yield* refusal(registry, "c.example", "x")).toEqual({ tag: "UnknownNamespace", retryAfterMs: undefined })
    })
  )

  it.effect("a registration naming another env without a higher epoch: 409, and it changes nothing", () =>
    Effect.gen(function* () {
      const { registry } = yield* fleet([["wa", [docs("a.example", "prod")], "5"]])
      const refused = yield* Effect.result(
        registry.register({ worker: "ws", advertiseUrl: "http://127.0.0.1:1/ws", namespaces: [docs("a.example", "staging")], headroom: 9, draining: false, epoch: "5", callerKey: undefined })
      )
      expect(Result.isFailure(refused) && refused.failure._tag).toBe("BindingHeldByAnotherEnv")
      expect((yield* registry.workers).map((w) => w.worker)).toEqual(["wa"])
      expect((yield* registry.resolve(request("a.example", "x"))).env).toBe("prod")
    })
  )

  it.effect("takeover wind_down: 503 with Retry-After until the deadline, listed in the owner's heartbeat; then placed on the request's hostname", () =>
    Effect.gen(function* () {
      const { registry, beat, advance } = yield* fleet([
        ["wa", [docs("a.example", "prod")], "1"],
        ["wb", [docs("b.example", "prod")], "1"]
      ])
      const held = yield* registry.resolve(request("a.example", "doc1"))
      expect(yield* refusal(registry, "b.example", "doc1")).toEqual({ tag: "TakeoverInProgress", retryAfterMs: LEASE })
      // Through the owner's own hostname it is still forwarded until the deadline.
      expect((yield* registry.resolve(request("a.example", "doc1"))).worker).toBe("wa")
      expect((yield* beat("wa")).windDown).toEqual([{ env: "prod", namespace: "/docs", id: "doc1", epoch: held.epoch, deadline: T0 + LEASE + LEASE }])
      yield* advance(LEASE / 3)
      expect(yield* refusal(registry, "b.example", "doc1")).toEqual({ tag: "TakeoverInProgress", retryAfterMs: LEASE - LEASE / 3 })
      yield* advance(LEASE - LEASE / 3)
      const taken = yield* registry.resolve(request("b.example", "doc1"))
      expect([taken.worker, taken.isNew, BigInt(taken.epoch) > BigInt(held.epoch)]).toEqual(["wb", true, true])
    })
  )

  it.effect("an owner registered for two hostnames keeps its placement through either; through a third, the takeover", () =>
    Effect.gen(function* () {
      const { registry } = yield* fleet([
        ["wab", [docs("a.example", "prod"), docs("b.example", "prod")], "1"],
        ["wc", [docs("c.example", "prod")], "1"]
      ])
      const held = yield* registry.resolve(request("a.example", "both"))
      const again = yield* registry.resolve(request("b.example", "both"))
      expect([held.worker, again.worker, again.epoch, again.isNew]).toEqual(["wab", "wab", held.epoch, false])
      expect((yield* refusal(registry, "c.example", "both")).tag).toBe("TakeoverInProgress")
      // During the wind-down, both of the owner's hostnames are still forwarded to it.
      expect((yield* registry.resolve(request("b.example", "both"))).worker).toBe("wab")
    })
  )

  it.effect("takeover wind_down ends early when the owner releases; an env with deny answers 503 placement held by another hostname", () =>
    Effect.gen(function* () {
      const { registry } = yield* fleet([
        ["wa", [docs("a.example", "prod")], "1"],
        ["wb", [docs("b.example", "prod")], "1"],
        ["sa", [{ namespace: "/docs", hostname: "c.example", env: "strict" }], "1"],
        ["sb", [{ namespace: "/docs", hostname: "d.example", env: "strict" }], "1"]
      ])
      const held = yield* registry.resolve(request("a.example", "doc2"))
      expect((yield* refusal(registry, "b.example", "doc2")).tag).toBe("TakeoverInProgress")
      expect(yield* registry.release({ env: "prod", namespace: "/docs", id: "doc2" }, held.epoch)).toEqual({ _tag: "Done" })
      expect((yield* registry.resolve(request("b.example", "doc2"))).worker).toBe("wb")

      yield* registry.resolve(request("c.example", "doc3"))
      expect(yield* refusal(registry, "d.example", "doc3")).toEqual({ tag: "PlacementHeldByAnotherHostname", retryAfterMs: undefined })
    })
  )

  it.effect("a higher-epoch registration rebinds the pair: its new ids wait one lease; ids placed in the new env are served", () =>
    Effect.gen(function* () {
      const { registry, advance, join } = yield* fleet([
        ["wa", [docs("a.example", "prod")], "1"],
        ["ws", [docs("s.example", "staging")], "1"]
      ])
      const stagingId = yield* registry.resolve(request("s.example", "shared"))
      yield* join("ws2", [docs("a.example", "staging")], "2")
      expect(yield* refusal(registry, "a.example", "fresh")).toEqual({ tag: "HostnameBindingDisplaced", retryAfterMs: LEASE })
      // Already placed in staging (through s.example): step 2 comes before the displacement wait.
      const served = yield* Effect.result(registry.resolve(request("a.example", "shared")))
      expect(Result.isFailure(served) && served.failure._tag).toBe("TakeoverInProgress")
      expect(stagingId.env).toBe("staging")
      yield* advance(LEASE)
      const placed = yield* registry.resolve(request("a.example", "fresh"))
      expect([placed.worker, placed.env]).toEqual(["ws2", "staging"])
    })
  )

  it.effect("outside hostname-aware mode nothing changes: the empty hostname and env resolve as before", () =>
    Effect.gen(function* () {
      const { registry } = yield* fleet([["w", [{ namespace: "/docs", hostname: "", env: "" }], "0"]])
      const placed = yield* registry.resolve(request("", "x"))
      expect([placed.worker, placed.env]).toEqual(["w", ""])
    })
  )
})
