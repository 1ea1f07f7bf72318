// What `/fleet.json` answers (docs/operations.md "The fleet page"): its exact shape from the
// registry's worker views, placement counts and the rates; then read from a real (embedded)
// registry with placements made by resolves.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { fleetSnapshot, readFleet } from "../../src/http/FleetSnapshot.js"
import type { RateSeries } from "../../src/observe/Rates.js"
import type { RegistryPolicy, WorkerView } from "../../src/registry/Domain.js"
import { makeMemoryBackend } from "../../src/registry/Memory.js"
import { makeRegistry } from "../../src/registry/RegistryOnBackend.js"

const rates: RateSeries = { intervalMs: 1000, kept: 300, endsAt: 99_000, requests: [1, 2.5], errors: [0, 0.5] }

const view = (worker: string, extra: Partial<WorkerView> = {}): WorkerView => ({
  worker,
  advertiseUrl: `http://10.0.0.1:9000/${worker}`,
  namespaces: [{ namespace: "/threads", hostname: "", env: "" }],
  headroom: 4,
  leaseExpiresAt: 105_000,
  draining: false,
  degraded: false,
  nacks: 0,
  ...extra
})

describe("fleetSnapshot", () => {
  it("lists each worker with its lease left by Pinboard's clock, its flags and its placements, and the rates beside", () => {
    const snapshot = fleetSnapshot({
      now: 100_000,
      leaseMs: 15_000,
      buckets: 16,
      workers: [
        view("w1"),
        view("w2", {
          namespaces: [
            { namespace: "/docs", hostname: "a.example", env: "prod" },
            { namespace: "/docs", hostname: "b.example", env: "" }
          ],
          headroom: 0,
          leaseExpiresAt: 99_500,
          draining: true,
          degraded: true,
          nacks: 3
        })
      ],
      held: { counts: [7, 2], unreached: [5] },
      rates
    })
    expect(JSON.parse(JSON.stringify(snapshot))).toEqual({
      now: 100_000,
      leaseMs: 15_000,
      buckets: 16,
      uncountedBuckets: [5],
      workers: [
        {
          worker: "w1",
          advertiseUrl: "http://10.0.0.1:9000/w1",
          namespaces: ["/threads"],
          headroom: 4,
          leaseLeftMs: 5_000,
          draining: false,
          degraded: false,
          nacks: 0,
          placements: 7
        },
        {
          worker: "w2",
          advertiseUrl: "http://10.0.0.1:9000/w2",
          namespaces: ['/docs@a.example (env "prod")', '/docs@b.example (env "")'],
          headroom: 0,
          leaseLeftMs: -500,
          draining: true,
          degraded: true,
          nacks: 3,
          placements: 2
        }
      ],
      rates: { intervalMs: 1000, kept: 300, endsAt: 99_000, requests: [1, 2.5], errors: [0, 0.5] }
    })
  })
})

describe("readFleet", () => {
  const LEASE = 15_000
  const policy: RegistryPolicy = { leaseMs: LEASE, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: LEASE }
  const threads = [{ namespace: "/threads", hostname: "", env: "" }]

  it.effect("reads every worker and the placements each holds, in worker id order", () =>
    Effect.gen(function* () {
      const registry = makeRegistry(makeMemoryBackend(4, policy), policy, () => "wind_down")
      yield* TestClock.setTime(1_000_000)
      const b = yield* registry.register({ worker: "b", advertiseUrl: "http://127.0.0.1:1/b", namespaces: threads, headroom: 3, draining: false, callerKey: undefined })
      yield* registry.register({ worker: "a", advertiseUrl: "http://127.0.0.1:1/a", namespaces: threads, headroom: 9, draining: true, callerKey: undefined })
      yield* TestClock.adjust(LEASE - 1000)
      yield* registry.heartbeat("b", { incarnation: b.incarnation, headroom: 2, draining: false, degraded: false })
      yield* TestClock.adjust(1000)
      for (const id of ["x", "y", "z"]) {
        yield* registry.resolve({ env: "", namespace: "/threads", id, hostname: "", caller: undefined, affinity: "", excluded: [] })
      }
      yield* TestClock.adjust(500)
      const snapshot = yield* readFleet(registry, 4, () => rates)
      expect(snapshot.now).toBe(1_000_000 + LEASE + 500)
      expect(snapshot.uncountedBuckets).toEqual([])
      expect(snapshot.rates).toBe(rates)
      expect(snapshot.workers.map((w) => [w.worker, w.leaseLeftMs, w.headroom, w.draining, w.placements])).toEqual([
        ["a", -500, 9, true, 0],
        ["b", LEASE - 1500, 2, false, 3]
      ])
    }))
})
