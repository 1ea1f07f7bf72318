// The membership view's proposal (src/registry/MembershipView.ts) is docs/protocol.md "Resolution"'s choice over the
// view's candidates: its cached rendezvous rankings (the first 8 workers of a members list per
// affinity value) must answer as rendezvousPick over the candidates, also when the best-ranked
// workers are not candidates, and when the same affinity comes back after the membership changed.
import { describe, expect, it } from "@effect/vitest"
import type { RegistryPolicy, ResolveQuery } from "../../src/registry/Domain.js"
import { applyUpdates, candidatesOf, emptyView, propose, type ViewRecord } from "../../src/registry/MembershipView.js"
import { choosePlacement } from "../../src/registry/Placement.js"
import * as Gen from "../support/Arbitraries.js"

const policy: RegistryPolicy = { leaseMs: 15_000, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: 15_000 }

const record = (worker: string, headroom: number, draining: boolean): ViewRecord => ({
  worker,
  memberKeys: ["|/n"],
  headroom,
  draining,
  degraded: false,
  nackWindowStart: 0,
  nackCount: 0,
  namespaces: [{ namespace: "/n", hostname: "", env: "" }]
})

const fleet = Gen.array(Gen.record({ headroom: Gen.constantFrom(0, 1, 2, 5), draining: Gen.constantFrom(false, true, true, true), short: Gen.boolean() }), {
  minLength: 1,
  maxLength: 60
})

describe("a membership view's proposal", () => {
  // Mostly draining workers: often none of a ranking's 8 is a candidate, and the whole list is ranked.
  it.prop(
    "is the reference choice over the view's candidates, whatever the cached rankings hold",
    [fleet, Gen.array(Gen.constantFrom("10.0.0.1", "10.0.0.2", "::1", "x"), { minLength: 1, maxLength: 6 }), Gen.double({ min: 0, max: 0.999 })],
    ([workers, affinities, r]) => {
      const view = emptyView()
      const ids = workers.map((_, i) => `w${String(i).padStart(2, "0")}`)
      applyUpdates(view, workers.map((w, i) => ({ worker: ids[i]!, record: record(ids[i]!, w.headroom, w.draining) })))
      const short = new Set(ids.filter((_, i) => workers[i]!.short))
      for (const affinity of affinities) {
        const query: ResolveQuery = { env: "", namespace: "/n", id: "x", hostname: "", takeover: "wind_down", caller: undefined, affinity, excluded: [], r1: r, r2: 0.999 - r }
        const candidates = candidatesOf(view, query, 0, short, policy)
        const expected = choosePlacement({ candidates, caller: undefined, affinity, balanceFactor: policy.balanceFactor, r1: query.r1, r2: query.r2 }) ?? ""
        expect(propose(view, query, 0, short, policy)).toBe(expected)
      }
      // The same affinity values after a worker leaves: new members, new rankings.
      applyUpdates(view, [{ worker: ids[0]!, record: undefined }])
      for (const affinity of affinities) {
        const query: ResolveQuery = { env: "", namespace: "/n", id: "x", hostname: "", takeover: "wind_down", caller: undefined, affinity, excluded: [], r1: r, r2: 0.999 - r }
        const candidates = candidatesOf(view, query, 0, short, policy)
        const expected = choosePlacement({ candidates, caller: undefined, affinity, balanceFactor: policy.balanceFactor, r1: query.r1, r2: query.r2 }) ?? ""
        expect(propose(view, query, 0, short, policy)).toBe(expected)
      }
    },
    { arbitrary: { runs: 300 } }
  )
})
