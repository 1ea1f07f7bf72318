// Time rules of the registry, driven by TestClock, on both layers: cold start, lease lapse,
// 410 lease lost, wind-down deadlines, the nack window, epochs across a wipe.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import { TestClock } from "effect/testing"
import { bucketOf } from "../../src/contract/Bucket.js"
import type { RegistryPolicy } from "../../src/registry/Domain.js"
import { rendezvousScore } from "../../src/registry/Placement.js"
import type { RegistryService } from "../../src/registry/Registry.js"
import { makeRegistry } from "../../src/registry/RegistryOnBackend.js"
import { backendSubjects, useRedis } from "../support/RedisBackend.js"

const LEASE = 15_000
const BUCKETS = 4
const T0 = 1_800_000_000_000
const policy: RegistryPolicy = { leaseMs: LEASE, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: LEASE }
const threads = [{ namespace: "/threads", hostname: "", env: "" }]
const key = (id: string) => ({ env: "", namespace: "/threads", id })
const request = (id: string, affinity = "10.0.0.1") => ({ ...key(id), hostname: "", caller: undefined, affinity, excluded: [] })

interface Subject {
  readonly registry: RegistryService
  readonly wipe: (bucket: number) => Effect.Effect<void>
}

const redis = useRedis()

const subjects: ReadonlyArray<readonly [string, () => Subject]> = backendSubjects(redis, "life", BUCKETS, policy).map(([name, make]) => [
  name,
  () => {
    const { backend, wipe } = make()
    return { registry: makeRegistry(backend, policy, () => "wind_down"), wipe }
  }
])

/** A registered worker, kept alive, with the cold start behind it. */
const warmFleet = (registry: RegistryService, workers: ReadonlyArray<readonly [string, number]>) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(T0)
    const incarnations = new Map<string, string>()
    for (const [worker, headroom] of workers) {
      const answer = yield* registry.register({ worker, advertiseUrl: `http://127.0.0.1:1/${worker}`, namespaces: threads, headroom, draining: false, callerKey: undefined })
      incarnations.set(worker, answer.incarnation)
    }
    const beat = (worker: string, extra: { draining?: boolean; degraded?: boolean; headroom?: number } = {}) =>
      registry.heartbeat(worker, {
        incarnation: incarnations.get(worker)!,
        headroom: extra.headroom ?? workers.find(([w]) => w === worker)![1],
        draining: extra.draining ?? false,
        degraded: extra.degraded ?? false
      })
    const beatAll = Effect.forEach(workers, ([worker]) => beat(worker), { discard: true })
    yield* TestClock.adjust(LEASE / 2)
    yield* beatAll
    yield* TestClock.adjust(LEASE / 2)
    yield* beatAll
    return { incarnations, beat, beatAll }
  })

describe.each(subjects)("registry lifecycle (%s)", (_name, make) => {
  it.effect("refuses new placements for one lease after a bucket's first use", () =>
    Effect.gen(function* () {
      const { registry } = make()
      yield* TestClock.setTime(T0)
      const { incarnation } = yield* registry.register({ worker: "w1", advertiseUrl: "http://127.0.0.1:1", namespaces: threads, headroom: 1, draining: false, callerKey: undefined })
      yield* TestClock.adjust(LEASE - 1)
      yield* registry.heartbeat("w1", { incarnation, headroom: 1, draining: false, degraded: false })
      const cold = yield* Effect.flip(registry.resolve(request("a")))
      expect(cold).toMatchObject({ _tag: "RegistryColdStart", retryAfterMs: 1 })
      yield* TestClock.adjust(1)
      const placed = yield* registry.resolve(request("a"))
      expect(placed).toMatchObject({ worker: "w1", isNew: true })
      expect(BigInt(placed.epoch) > BigInt(T0) * 1_000_000n).toBe(true)
    }))

  it.effect("serves a placement until its owner's lease lapses, and never revives the lease", () =>
    Effect.gen(function* () {
      const { registry } = make()
      const { beat } = yield* warmFleet(registry, [["w1", 1]])
      const first = yield* registry.resolve(request("a"))
      expect(yield* registry.resolve(request("a"))).toEqual({ ...first, isNew: false })
      yield* TestClock.adjust(LEASE - 1)
      expect((yield* registry.placement(key("a"))).live).toBe(true)
      yield* TestClock.adjust(1)
      expect((yield* registry.placement(key("a"))).live).toBe(false)
      expect((yield* Effect.flip(registry.resolve(request("a"))))._tag).toBe("NoLiveBackends")
      expect((yield* Effect.flip(beat("w1")))._tag).toBe("LeaseLost")
    }))

  it.effect("places nothing new on a worker with less than min(5 s, lease / 3) left, but keeps serving it", () =>
    Effect.gen(function* () {
      const { registry } = make()
      yield* warmFleet(registry, [["w1", 1]])
      yield* registry.resolve(request("a"))
      yield* TestClock.adjust(LEASE - 5000)
      expect((yield* registry.resolve(request("b"))).worker).toBe("w1")
      yield* TestClock.adjust(1)
      expect((yield* Effect.flip(registry.resolve(request("c"))))._tag).toBe("NoLiveBackends")
      expect((yield* registry.resolve(request("a"))).isNew).toBe(false)
    }))

  it.effect("answers 410 lease lost after an incarnation change, and the old incarnation's placements end", () =>
    Effect.gen(function* () {
      const { registry } = make()
      const { incarnations } = yield* warmFleet(registry, [["w1", 1]])
      const before = yield* registry.resolve(request("a"))
      const again = yield* registry.register({ worker: "w1", advertiseUrl: "http://127.0.0.1:1", namespaces: threads, headroom: 1, draining: false, callerKey: undefined })
      expect(again.incarnation).not.toBe(incarnations.get("w1"))
      const lost = yield* Effect.flip(registry.heartbeat("w1", { incarnation: incarnations.get("w1")!, headroom: 1, draining: false, degraded: false }))
      expect(lost._tag).toBe("LeaseLost")
      const after = yield* registry.resolve(request("a"))
      expect(after.isNew).toBe(true)
      expect(BigInt(after.epoch) > BigInt(before.epoch)).toBe(true)
    }))

  it.effect("answers 410 when a bucket was wiped; the wiped bucket cold-starts and epochs keep increasing", () =>
    Effect.gen(function* () {
      const { registry, wipe } = make()
      yield* warmFleet(registry, [["w1", 1]])
      const before = yield* registry.resolve(request("a"))
      yield* TestClock.adjust(1)
      yield* wipe(bucketOf("", "/threads", "a", BUCKETS))
      const lost = yield* Effect.flip(registry.heartbeat("w1", { incarnation: "whatever", headroom: 1, draining: false, degraded: false }))
      expect(lost._tag).toBe("LeaseLost")
      const { incarnation } = yield* registry.register({ worker: "w1", advertiseUrl: "http://127.0.0.1:1", namespaces: threads, headroom: 1, draining: false, callerKey: undefined })
      expect((yield* Effect.flip(registry.resolve(request("a"))))._tag).toBe("RegistryColdStart")
      yield* TestClock.adjust(LEASE / 2)
      yield* registry.heartbeat("w1", { incarnation, headroom: 1, draining: false, degraded: false })
      yield* TestClock.adjust(LEASE / 2)
      const after = yield* registry.resolve(request("a"))
      expect(after.isNew).toBe(true)
      expect(BigInt(after.epoch) > BigInt(before.epoch)).toBe(true)
    }))

  it.effect("lists wind-down deadlines in the heartbeat and ends the placement at the deadline", () =>
    Effect.gen(function* () {
      const { registry } = make()
      const { beat } = yield* warmFleet(registry, [["w1", 1]])
      const placed = yield* registry.resolve(request("a"))
      const started = yield* registry.beginWindDown(key("a"), placed.epoch)
      const deadline = T0 + LEASE + LEASE
      expect(started).toEqual({ _tag: "WindingDown", deadline })
      expect(yield* registry.beginWindDown(key("a"), placed.epoch)).toEqual({ _tag: "WindingDown", deadline })
      expect(yield* beat("w1")).toEqual({ leaseExpiresAt: T0 + 2 * LEASE, windDown: [{ ...key("a"), epoch: placed.epoch, deadline }], unrenewed: [] })
      yield* TestClock.adjust(LEASE - 1)
      yield* beat("w1")
      expect((yield* registry.resolve(request("a"))).isNew).toBe(false)
      yield* TestClock.adjust(1)
      expect((yield* beat("w1")).windDown).toEqual([])
      const replaced = yield* registry.resolve(request("a"))
      expect(replaced.isNew).toBe(true)
      expect(BigInt(replaced.epoch) > BigInt(placed.epoch)).toBe(true)
    }))

  it.effect("degrades a worker after nack.threshold refusals within the window, until the window ends", () =>
    Effect.gen(function* () {
      const { registry, } = make()
      const { beat } = yield* warmFleet(registry, [["w1", 1]])
      yield* registry.nack("w1")
      yield* registry.nack("w1")
      expect((yield* registry.resolve(request("a"))).worker).toBe("w1")
      yield* registry.nack("w1")
      expect(yield* registry.workers).toMatchObject([{ worker: "w1", degraded: true, nacks: 3 }])
      expect((yield* Effect.flip(registry.resolve(request("b"))))._tag).toBe("NoLiveBackends")
      expect((yield* registry.resolve(request("a"))).isNew).toBe(false)
      yield* TestClock.adjust(LEASE / 2)
      yield* beat("w1")
      yield* TestClock.adjust(LEASE / 2)
      yield* beat("w1")
      expect(yield* registry.workers).toMatchObject([{ worker: "w1", degraded: false, nacks: 0 }])
      expect((yield* registry.resolve(request("b"))).isNew).toBe(true)
    }))

  it.effect("keeps the preference at exactly mean / balanceFactor and leaves it just below", () =>
    Effect.gen(function* () {
      const { registry } = make()
      // Headrooms 1 and 1.5: mean 1.25, threshold exactly 1.
      yield* warmFleet(registry, [["low", 1], ["high", 1.5]])
      const affinityFor = (target: string) =>
        ["a", "b", "c", "d", "e", "f", "g", "h"].find((a) => rendezvousScore(a, target) > rendezvousScore(a, target === "low" ? "high" : "low"))!
      expect((yield* registry.resolve(request("x", affinityFor("low")))).worker).toBe("low")
      yield* warmFleet(registry, [["low", 0.99], ["high", 1.5]])
      expect((yield* registry.resolve(request("y", affinityFor("low")))).worker).toBe("high")
    }))

  it.effect("prefers the caller's worker when it is a candidate", () =>
    Effect.gen(function* () {
      const { registry } = make()
      yield* warmFleet(registry, [["w1", 1], ["w2", 1], ["w3", 1]])
      for (const caller of ["w1", "w2", "w3"]) {
        expect((yield* registry.resolve({ ...request(`c-${caller}`), caller })).worker).toBe(caller)
      }
      const excluded = yield* registry.resolve({ ...request("d"), caller: "w1", excluded: ["w1"] })
      expect(excluded.worker).not.toBe("w1")
    }))

  it.effect("never places on a draining or degraded worker, and a deregistered worker's placements end now", () =>
    Effect.gen(function* () {
      const { registry } = make()
      const { beat, incarnations } = yield* warmFleet(registry, [["w1", 1], ["w2", 1]])
      yield* beat("w1", { draining: true })
      yield* beat("w2", { degraded: true })
      expect((yield* Effect.flip(registry.resolve(request("a"))))._tag).toBe("NoLiveBackends")
      yield* beat("w2")
      const placed = yield* registry.resolve(request("a"))
      expect(placed.worker).toBe("w2")
      yield* registry.deregister("w2", incarnations.get("w2")!)
      expect(Result.isFailure(yield* Effect.result(registry.placement(key("a"))))).toBe(true)
    }))
})
