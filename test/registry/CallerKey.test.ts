// An incarnation's caller key (docs/protocol.md "Keys of one bucket"), on both layers: held in
// the worker's record in every bucket for that incarnation (a new registration replaces it;
// heartbeats, drain and nacks keep it; deregistration and the sweep remove it with the record),
// read by callerPlacement alone, never in another answer.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { bucketOf } from "../../src/contract/Bucket.js"
import type { RegistryPolicy } from "../../src/registry/Domain.js"
import type { RegistryService } from "../../src/registry/Registry.js"
import { makeRegistry } from "../../src/registry/RegistryOnBackend.js"
import { backendSubjects, useRedis } from "../support/RedisBackend.js"

const LEASE = 15_000
const BUCKETS = 4
const T0 = 1_800_000_000_000
const policy: RegistryPolicy = { leaseMs: LEASE, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: LEASE }
const threads = [{ namespace: "/threads", hostname: "", env: "" }]
const key = (id: string) => ({ env: "", namespace: "/threads", id })
const KEY_1 = "q1zVbN2cJ0o8f3Wm5yXe6tR4uI7pA9sD-gH_kL0mN2o"
const KEY_2 = "Zx8cV7bN6mQ5wE4rT3yU2iO1pA0sD9fG-hJ_kL8zX7c"

/** One id in each bucket: callerPlacement reads the bucket of the key asked for. */
const ONE_PER_BUCKET = Array.from({ length: BUCKETS }, (_, bucket) => {
  for (let i = 0; ; i++) if (bucketOf("", "/threads", `t${i}`, BUCKETS) === bucket) return key(`t${i}`)
})

const redis = useRedis()
const subjects = backendSubjects(redis, "callerkey", BUCKETS, policy).map(
  ([name, make]) => [name, () => makeRegistry(make().backend, policy, () => "wind_down")] as const
)

const register = (registry: RegistryService, worker: string, callerKey: string | undefined) =>
  registry.register({ worker, advertiseUrl: `http://127.0.0.1:1/${worker}`, namespaces: threads, headroom: 1, draining: false, callerKey })

/** What callerPlacement answers for `worker` in every bucket. */
const callerInEveryBucket = (registry: RegistryService, worker: string) =>
  Effect.forEach(ONE_PER_BUCKET, (k) => Effect.map(registry.callerPlacement(k, worker), (answer) => answer.caller))

describe.each(subjects)("the caller key (%s)", (_name, make) => {
  it.effect("is held in every bucket for the incarnation, and a new registration replaces it", () =>
    Effect.gen(function* () {
      const registry = make()
      yield* TestClock.setTime(T0)
      const first = yield* register(registry, "w1", KEY_1)
      expect(yield* callerInEveryBucket(registry, "w1")).toEqual(Array(BUCKETS).fill({ incarnation: first.incarnation, callerKey: KEY_1 }))
      const second = yield* register(registry, "w1", KEY_2)
      expect(yield* callerInEveryBucket(registry, "w1")).toEqual(Array(BUCKETS).fill({ incarnation: second.incarnation, callerKey: KEY_2 }))
      yield* register(registry, "w1", undefined)
      expect(yield* callerInEveryBucket(registry, "w1")).toEqual(Array(BUCKETS).fill(undefined))
    }))

  it.effect("is kept across heartbeats, a drain and nacks", () =>
    Effect.gen(function* () {
      const registry = make()
      yield* TestClock.setTime(T0)
      const { incarnation } = yield* register(registry, "w1", KEY_1)
      yield* TestClock.adjust(LEASE / 2)
      yield* registry.heartbeat("w1", { incarnation, headroom: 3, draining: false, degraded: true })
      yield* registry.nack("w1")
      yield* TestClock.adjust(LEASE / 2)
      yield* registry.heartbeat("w1", { incarnation, headroom: 2, draining: true, degraded: false })
      expect(yield* callerInEveryBucket(registry, "w1")).toEqual(Array(BUCKETS).fill({ incarnation, callerKey: KEY_1 }))
    }))

  it.effect("leaves with the record: deregistered, or swept once the lease lapsed", () =>
    Effect.gen(function* () {
      const registry = make()
      yield* TestClock.setTime(T0)
      const one = yield* register(registry, "w1", KEY_1)
      yield* register(registry, "w2", KEY_2)
      yield* registry.deregister("w1", "not-its-incarnation")
      expect(yield* callerInEveryBucket(registry, "w1")).toEqual(Array(BUCKETS).fill({ incarnation: one.incarnation, callerKey: KEY_1 }))
      yield* registry.deregister("w1", one.incarnation)
      expect(yield* callerInEveryBucket(registry, "w1")).toEqual(Array(BUCKETS).fill(undefined))
      yield* TestClock.adjust(LEASE)
      yield* registry.sweep
      expect(yield* callerInEveryBucket(registry, "w2")).toEqual(Array(BUCKETS).fill(undefined))
    }))

  it.effect("callerPlacement: the row as placement reads it, or none, beside the caller's record, or none", () =>
    Effect.gen(function* () {
      const registry = make()
      yield* TestClock.setTime(T0)
      const { incarnation } = yield* register(registry, "w1", KEY_1)
      yield* register(registry, "w2", undefined)
      yield* TestClock.adjust(LEASE / 2)
      yield* registry.heartbeat("w1", { incarnation, headroom: 1, draining: false, degraded: false })
      yield* TestClock.adjust(LEASE / 2)
      yield* registry.heartbeat("w1", { incarnation, headroom: 1, draining: false, degraded: false })
      const placed = yield* registry.resolve({ ...key("a"), hostname: "", caller: undefined, affinity: "", excluded: ["w2"] })
      expect(placed.worker).toBe("w1")
      const row = yield* registry.placement(key("a"))
      expect(yield* registry.callerPlacement(key("a"), "w1")).toEqual({ placement: row, caller: { incarnation, callerKey: KEY_1 } })
      expect(yield* registry.callerPlacement(key("a"), "w2")).toEqual({ placement: row, caller: undefined })
      expect(yield* registry.callerPlacement(key("a"), "nobody")).toEqual({ placement: row, caller: undefined })
      expect(yield* registry.callerPlacement(key("b"), "w1")).toEqual({ placement: undefined, caller: { incarnation, callerKey: KEY_1 } })
      expect(yield* registry.callerPlacement(key("b"), "nobody")).toEqual({ placement: undefined, caller: undefined })
    }))

  it.effect("is in no other answer: register, heartbeat, workers, a page of them, placement, resolve, placements held", () =>
    Effect.gen(function* () {
      const registry = make()
      yield* TestClock.setTime(T0)
      const registered = yield* register(registry, "w1", KEY_1)
      const beat = () => registry.heartbeat("w1", { incarnation: registered.incarnation, headroom: 1, draining: false, degraded: false })
      yield* TestClock.adjust(LEASE / 2)
      yield* beat()
      yield* TestClock.adjust(LEASE / 2)
      const answers: Array<unknown> = [
        registered,
        yield* beat(),
        yield* registry.resolve({ ...key("a"), hostname: "", caller: "w1", affinity: "", excluded: [] }),
        yield* registry.placement(key("a")),
        yield* registry.workers,
        yield* registry.workersPage("", 10),
        yield* registry.placementsHeld(["w1"])
      ]
      expect((answers[4] as ReadonlyArray<unknown>).length).toBe(1)
      for (const answer of answers) expect(JSON.stringify(answer)).not.toContain(KEY_1)
    }))
})
