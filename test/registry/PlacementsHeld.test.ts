// Placements per worker, as the fleet page shows them (docs/operations.md "The fleet page"), on
// both layers: the rows naming each worker, summed over every bucket, following placements,
// releases, deregistration and a new incarnation; asked for in slices of 256 workers.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import type { RegistryPolicy } from "../../src/registry/Domain.js"
import { makeMemoryBackend } from "../../src/registry/Memory.js"
import type { RegistryService } from "../../src/registry/Registry.js"
import { makeRegistry } from "../../src/registry/RegistryOnBackend.js"
import { redisBackend, useRedis } from "../support/RedisBackend.js"

const LEASE = 15_000
const BUCKETS = 4
const T0 = 1_800_000_000_000
const policy: RegistryPolicy = { leaseMs: LEASE, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: LEASE }
const threads = [{ namespace: "/threads", hostname: "", env: "" }]
const key = (id: string) => ({ env: "", namespace: "/threads", id })
const request = (id: string, affinity: string) => ({ ...key(id), hostname: "", caller: undefined, affinity, excluded: [] })

const redis = useRedis()
let prefixes = 0

const subjects: ReadonlyArray<readonly [string, () => RegistryService]> = [
  ["embedded", () => makeRegistry(makeMemoryBackend(BUCKETS, policy), policy, () => "wind_down")],
  ["redis", () => makeRegistry(redisBackend(redis.client, `held${prefixes++}`, BUCKETS, policy), policy, () => "wind_down")]
]

/** w1 and w2 live, w3 draining, the cold start behind them; their incarnations. */
const warmFleet = (registry: RegistryService) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(T0)
    const incarnations = new Map<string, string>()
    for (const [worker, draining] of [["w1", false], ["w2", false], ["w3", true]] as const) {
      const answer = yield* registry.register({ worker, advertiseUrl: `http://127.0.0.1:1/${worker}`, namespaces: threads, headroom: 5, draining, callerKey: undefined })
      incarnations.set(worker, answer.incarnation)
    }
    yield* TestClock.adjust(LEASE / 2)
    for (const [worker, incarnation] of incarnations) {
      yield* registry.heartbeat(worker, { incarnation, headroom: 5, draining: worker === "w3", degraded: false })
    }
    yield* TestClock.adjust(LEASE / 2)
    for (const [worker, incarnation] of incarnations) {
      yield* registry.heartbeat(worker, { incarnation, headroom: 5, draining: worker === "w3", degraded: false })
    }
    return incarnations
  })

/** How many of `ids` the registry's placement rows give to each worker. */
const ownersOf = (registry: RegistryService, ids: ReadonlyArray<string>) =>
  Effect.reduce(ids, (): Record<string, number> => ({ w1: 0, w2: 0, w3: 0 }), (counts, id) =>
    Effect.map(registry.placement(key(id)), (row) => ({ ...counts, [row.worker]: counts[row.worker]! + 1 }))
  )

describe.each(subjects)("placements held per worker (%s)", (_name, make) => {
  it.effect("counts each worker's rows over every bucket, and follows release, deregistration and a new incarnation", () =>
    Effect.gen(function* () {
      const registry = make()
      const incarnations = yield* warmFleet(registry)
      const ids = Array.from({ length: 24 }, (_, i) => `t${i}`)
      const epochs = new Map<string, string>()
      for (const [i, id] of ids.entries()) epochs.set(id, (yield* registry.resolve(request(id, `10.0.0.${i}`))).epoch)
      const owners = yield* ownersOf(registry, ids)
      expect(owners.w1! + owners.w2!).toBe(24)
      expect(owners.w1).toBeGreaterThan(0)
      expect(owners.w2).toBeGreaterThan(0)

      const asked = ["w1", "w2", "w3", "nobody"]
      expect(yield* registry.placementsHeld(asked)).toEqual({ counts: [owners.w1, owners.w2, 0, 0], unreached: [] })
      // More workers than one script call takes (256): each count still at its worker's place.
      const many = ["w1", ...Array.from({ length: 298 }, (_, i) => `nobody${i}`), "w2"]
      expect((yield* registry.placementsHeld(many)).counts).toEqual([owners.w1, ...new Array<number>(298).fill(0), owners.w2])

      const released = ids.find((id) => epochs.has(id))!
      const owner = (yield* registry.placement(key(released))).worker
      yield* registry.release(key(released), epochs.get(released)!)
      const afterRelease = yield* registry.placementsHeld(["w1", "w2"])
      expect(afterRelease.counts).toEqual([owners.w1! - (owner === "w1" ? 1 : 0), owners.w2! - (owner === "w2" ? 1 : 0)])

      yield* registry.deregister("w1", incarnations.get("w1")!)
      expect((yield* registry.placementsHeld(["w1", "w2"])).counts).toEqual([0, afterRelease.counts[1]])

      yield* registry.register({ worker: "w2", advertiseUrl: "http://127.0.0.1:1/w2", namespaces: threads, headroom: 5, draining: false, callerKey: undefined })
      expect((yield* registry.placementsHeld(["w2"])).counts).toEqual([0])
    }))

  it.effect("asks nothing for no workers", () =>
    Effect.gen(function* () {
      expect(yield* make().placementsHeld([])).toEqual({ counts: [], unreached: [] })
    }))
})
