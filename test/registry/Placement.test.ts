// docs/protocol.md "Resolution" steps 5 and 6 as properties of the pure placement choice.
import { describe, expect, it } from "@effect/vitest"
import type { RegistryPolicy, WorkerRecord } from "../../src/registry/Domain.js"
import { byWorkerId, choosePlacement, isPlaceable, rendezvousPick as pick, rendezvousScore, type Candidate } from "../../src/registry/Placement.js"
import * as Gen from "../support/Arbitraries.js"

const candidates = Gen.map(
  Gen.uniqueArray(Gen.record({ worker: Gen.stringMatching(/^[A-Za-z0-9._~-]{1,8}$/), headroom: Gen.double({ min: 0, max: 1000 }) }), {
    minLength: 1,
    maxLength: 8,
    selector: (c) => c.worker
  }),
  (list) => [...list].sort(byWorkerId)
)
const unit = Gen.double({ min: 0, max: 1, maxExcluded: true })

const choice = (list: ReadonlyArray<Candidate>, extra: Partial<Parameters<typeof choosePlacement>[0]> = {}) =>
  choosePlacement({ candidates: list, caller: undefined, affinity: "10.0.0.1", balanceFactor: 1.25, r1: 0, r2: 0, ...extra })

const mean = (list: ReadonlyArray<Candidate>) => list.reduce((sum, c) => sum + c.headroom, 0) / list.length
const rendezvousPick = (list: ReadonlyArray<Candidate>, affinity: string) =>
  list.reduce((best, c) => (rendezvousScore(affinity, c.worker) > rendezvousScore(affinity, best.worker) ? c : best))

describe("placement choice", () => {
  it("places nothing without candidates", () => {
    expect(choice([])).toBeUndefined()
  })

  it.prop("always picks a candidate", [candidates, Gen.string(), Gen.option(Gen.string(), { nil: undefined }), unit, unit], ([list, affinity, caller, r1, r2]) => {
    expect(list.map((c) => c.worker)).toContain(choice(list, { affinity, caller, r1, r2 }))
  })

  it.prop("a caller's own worker wins while its headroom is at least mean / balanceFactor", [candidates, unit, unit], ([list, r1, r2]) => {
    for (const caller of list) {
      const picked = choice(list, { caller: caller.worker, r1, r2 })
      if (caller.headroom >= mean(list) / 1.25) expect(picked).toBe(caller.worker)
    }
  })

  it.prop("otherwise the rendezvous winner, on the greatest sha1(affinity \\n worker)", [candidates, Gen.string(), unit, unit], ([list, affinity, r1, r2]) => {
    const preferred = rendezvousPick(list, affinity)
    if (preferred.headroom >= mean(list) / 1.25) expect(choice(list, { affinity, r1, r2 })).toBe(preferred.worker)
  })

  it.prop("below the threshold, the higher headroom of candidates i = floor(r1 n) and j (skipping i)", [candidates, Gen.string(), unit, unit], ([list, affinity, r1, r2]) => {
    const preferred = rendezvousPick(list, affinity)
    if (preferred.headroom >= mean(list) / 1.25 || list.length < 2) return
    const n = list.length
    const i = Math.floor(r1 * n)
    const j0 = Math.floor(r2 * (n - 1))
    const j = j0 >= i ? j0 + 1 : j0
    expect(i).not.toBe(j)
    const [a, b] = [list[i]!, list[j]!]
    expect(choice(list, { affinity, r1, r2 })).toBe(b.headroom > a.headroom ? b.worker : a.worker)
  })

  it("keeps rendezvous stable when another worker leaves", () => {
    const list = ["a", "b", "c", "d", "e"].map((worker) => ({ worker, headroom: 1 }))
    for (const affinity of ["10.0.0.1", "10.0.0.2", "192.168.1.9", "::1"]) {
      const picked = choice(list, { affinity })!
      const without = list.filter((c) => c.worker !== picked && c.worker !== "a" && c.worker !== "b").concat(list.filter((c) => c.worker === picked))
      expect(choice([...without].sort(byWorkerId), { affinity })).toBe(picked)
    }
  })
})

describe("placement choice at its edges", () => {
  it("byWorkerId orders by id, equal ids equal", () => {
    expect(byWorkerId({ worker: "a", headroom: 0 }, { worker: "b", headroom: 0 })).toBe(-1)
    expect(byWorkerId({ worker: "b", headroom: 0 }, { worker: "a", headroom: 0 })).toBe(1)
    expect(byWorkerId({ worker: "a", headroom: 0 }, { worker: "a", headroom: 9 })).toBe(0)
  })

  it("the rendezvous score is the hex sha1 of affinity, newline, worker", () => {
    // sha1("10.0.0.1\nw1"), as `printf '10.0.0.1\nw1' | sha1sum` prints it; the Lua script computes the same.
    expect(rendezvousScore("10.0.0.1", "w1")).toBe("9f45e0b75aa2596d5af2292f71e85e8195245888")
  })

  it("a preferred worker at exactly mean / balanceFactor keeps the placement; just below, two random choices decide", () => {
    // Mean 1.25, threshold 1: the caller's worker at headroom 1 is kept.
    const list = [{ worker: "a", headroom: 1 }, { worker: "b", headroom: 1.5 }, { worker: "c", headroom: 1.25 }]
    expect(choice(list, { caller: "a", r1: 0.5, r2: 0.9 })).toBe("a")
    const below = [{ worker: "a", headroom: 0.999 }, { worker: "b", headroom: 1.5 }, { worker: "c", headroom: 1.25 }]
    // i = floor(0.5 * 3) = 1 (b), j = floor(0.9 * 2) = 1, not before i: 2 (c); b has more headroom.
    expect(choice(below, { caller: "a", r1: 0.5, r2: 0.9 })).toBe("b")
    // i = 0 (a), j = floor(0.4 * 2) = 0, not before i: 1 (b).
    expect(choice(below, { caller: "a", r1: 0, r2: 0.4 })).toBe("b")
    // i = 2 (c), j = floor(0.9 * 2) = 1 (b), before i: kept.
    expect(choice(below, { caller: "a", r1: 0.9, r2: 0.9 })).toBe("b")
    // i = 2 (c), j = 0 (a): c has more headroom than a.
    expect(choice(below, { caller: "a", r1: 0.9, r2: 0 })).toBe("c")
  })

  it("two random choices with equal headroom keep the first; one candidate is chosen whatever its headroom", () => {
    const tied = [{ worker: "a", headroom: 0 }, { worker: "b", headroom: 0 }, { worker: "c", headroom: 3 }]
    expect(choice(tied, { caller: "a", r1: 0.5, r2: 0 })).toBe("b")
    expect(choice(tied, { caller: "a", r1: 0, r2: 0 })).toBe("a")
  })

  it("rendezvousPick is the candidate with the greatest score, wherever it stands", () => {
    const list = ["a", "b", "c", "d", "e", "f"].map((worker) => ({ worker, headroom: 1 }))
    for (const affinity of ["10.0.0.1", "10.0.0.2", "10.0.0.3", "192.168.1.9", "::1"]) {
      const best = rendezvousPick(list, affinity)
      expect(pick(list, affinity)).toBe(best)
      expect(pick([...list].reverse(), affinity)).toBe(best)
    }
    // A tie (the same score) goes to the first.
    const first = { worker: "a", headroom: 1 }
    expect(pick([first, { worker: "a", headroom: 2 }], "10.0.0.1")).toBe(first)
  })
})

describe("placeable workers", () => {
  const policy: RegistryPolicy = { leaseMs: 15_000, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: 15_000 }
  const NOW = 1_800_000_000_000
  const record = (extra: Partial<WorkerRecord> = {}): WorkerRecord => ({
    worker: "w1",
    advertiseUrl: "http://w1.test/",
    incarnation: "i1",
    namespaces: [],
    leaseExpiresAt: NOW + 15_000,
    headroom: 1,
    draining: false,
    degraded: false,
    nackWindowStart: 0,
    nackCount: 0,
    callerKey: undefined,
    ...extra
  })

  it("takes new placements with at least min(5 s, lease / 3) of lease left", () => {
    expect(isPlaceable(record({ leaseExpiresAt: NOW + 5_000 }), NOW, policy, [])).toBe(true)
    expect(isPlaceable(record({ leaseExpiresAt: NOW + 4_999 }), NOW, policy, [])).toBe(false)
    const short = { ...policy, leaseMs: 3_000 }
    expect(isPlaceable(record({ leaseExpiresAt: NOW + 1_000 }), NOW, short, [])).toBe(true)
    expect(isPlaceable(record({ leaseExpiresAt: NOW + 999 }), NOW, short, [])).toBe(false)
  })

  it("not while draining, degraded, nack-degraded or excluded", () => {
    expect(isPlaceable(record(), NOW, policy, ["w2"])).toBe(true)
    expect(isPlaceable(record({ draining: true }), NOW, policy, [])).toBe(false)
    expect(isPlaceable(record({ degraded: true }), NOW, policy, [])).toBe(false)
    expect(isPlaceable(record({ nackWindowStart: NOW - 1, nackCount: 3 }), NOW, policy, [])).toBe(false)
    expect(isPlaceable(record({ nackWindowStart: NOW - 1, nackCount: 2 }), NOW, policy, [])).toBe(true)
    expect(isPlaceable(record(), NOW, policy, ["w2", "w1"])).toBe(false)
  })
})
