// `pinboard inspect id`'s explanation (docs/protocol.md "Resolution" steps 2, 5, 6) held to the registry's own
// placement functions.
import { describe, expect, it } from "@effect/vitest"
import type { ListedWorker, PlacementAnswer } from "../../src/inspect/Answers.js"
import { type ExplainInput, explainResolve, placementOdds, type PlacementOutcome } from "../../src/inspect/Explain.js"
import type { WorkerRecord } from "../../src/registry/Domain.js"
import { byWorkerId, type Candidate, choosePlacement, isPlaceable, rendezvousScore } from "../../src/registry/Placement.js"
import * as fc from "../support/Arbitraries.js"

const NOW = 1_764_452_669_741
const LEASE_MS = 15_000 // min lease left: 5000

const listed = (worker: string, fields: Partial<ListedWorker> = {}): ListedWorker => ({
  worker,
  advertiseUrl: `http://10.0.0.1/${worker}`,
  namespaces: ["/pair"],
  headroom: 10,
  leaseExpiresAt: NOW + 10_000,
  draining: false,
  degraded: false,
  nacks: 0,
  ...fields
})

const row = (fields: Partial<PlacementAnswer> = {}): PlacementAnswer => ({
  namespace: "/pair",
  id: "t1",
  env: "",
  worker: "wa",
  advertiseUrl: "http://10.0.0.1/wa",
  epoch: "1764452669741000001",
  tag: "",
  placedAt: NOW - 1000,
  windDownAt: null,
  live: true,
  ...fields
})

const explain = (input: Partial<ExplainInput>) =>
  explainResolve({
    env: "",
    namespace: "/pair",
    hostname: undefined,
    placement: undefined,
    workers: [],
    now: NOW,
    leaseMs: LEASE_MS,
    balanceFactor: 1.25,
    affinity: "",
    caller: undefined,
    ...input
  })

const placeOf = (input: Partial<ExplainInput>) => {
  const explanation = explain(input)
  if (explanation._tag !== "Place") throw new Error(`expected a new placement, got ${JSON.stringify(explanation)}`)
  return explanation
}

const chosenOf = (input: Partial<ExplainInput>): Extract<PlacementOutcome, { _tag: "Chosen" }> => {
  const { outcome } = placeOf(input)
  if (outcome._tag !== "Chosen") throw new Error(`expected a choice, got ${JSON.stringify(outcome)}`)
  return outcome
}

describe("a placement row", () => {
  it("that is live: the resolve forwards to its owner at its epoch", () => {
    expect(explain({ placement: row(), workers: [listed("wa", { draining: true })] })).toEqual({
      _tag: "Forward",
      worker: "wa",
      epoch: "1764452669741000001"
    })
  })

  it("that has ended: the resolve deletes it and places anew, saying why it ended", () => {
    const workers = [listed("wa"), listed("wb")]
    expect(placeOf({ placement: row({ live: false }), workers }).ended).toEqual({
      worker: "wa",
      epoch: "1764452669741000001",
      reason: "owner-not-live"
    })
    expect(placeOf({ placement: row({ live: false, windDownAt: NOW - 1 }), workers }).ended?.reason).toBe("wind-down-passed")
    expect(placeOf({ workers }).ended).toBeNull()
  })
})

describe("candidates", () => {
  it("need min(5000, leaseMs / 3) of lease left, no draining, no degraded", () => {
    const { workers, minLeaseLeftMs } = placeOf({
      workers: [
        listed("a-ok"),
        listed("b-at-minimum", { leaseExpiresAt: NOW + 5000 }),
        listed("c-short", { leaseExpiresAt: NOW + 4999 }),
        listed("d-lapsed", { leaseExpiresAt: NOW }),
        listed("e-draining", { draining: true }),
        listed("f-degraded", { degraded: true, nacks: 3 }),
        listed("g-all", { leaseExpiresAt: NOW - 1, draining: true, degraded: true })
      ]
    })
    expect(minLeaseLeftMs).toBe(5000)
    expect(workers.map((w) => [w.worker, w.exclusions])).toEqual([
      ["a-ok", []],
      ["b-at-minimum", []],
      ["c-short", ["lease-short"]],
      ["d-lapsed", ["lapsed"]],
      ["e-draining", ["draining"]],
      ["f-degraded", ["degraded"]],
      ["g-all", ["lapsed", "draining", "degraded"]]
    ])
    expect(workers.find((w) => w.worker === "d-lapsed")?.leaseLeftMs).toBe(0)
  })

  it("are the workers of the namespace in the env, whatever else the listing holds", () => {
    const { workers } = placeOf({
      workers: [
        listed("wa", { namespaces: ["/threads", "/pair"] }),
        listed("wb", { namespaces: ["/threads"] }),
        listed("wc", { namespaces: [{ namespace: "/pair", hostname: "a.example", env: "" }] }),
        listed("wd", { namespaces: [{ namespace: "/pair", hostname: "b.example", env: "staging" }] })
      ]
    })
    expect(workers.map((w) => w.worker)).toEqual(["wa", "wc"])
    expect(placeOf({ env: "staging", workers: [listed("wa"), listed("wd", { namespaces: [{ namespace: "/pair", hostname: "b", env: "staging" }] })] })
      .workers.map((w) => w.worker)).toEqual(["wd"])
  })

  it("with --host, are the env's workers registered for that hostname (docs/proxy.md 'Hostname-aware mode')", () => {
    const workers = [
      listed("wa", { namespaces: ["/pair"] }),
      listed("wb", { namespaces: [{ namespace: "/pair", hostname: "a.example", env: "prod" }] }),
      listed("wc", { namespaces: [{ namespace: "/pair", hostname: "b.example", env: "prod" }, { namespace: "/pair", hostname: "a.example", env: "dev" }] }),
      listed("wd", { namespaces: [{ namespace: "/pair", hostname: "b.example", env: "prod" }] })
    ]
    const of = (env: string, hostname: string | undefined) => placeOf({ env, hostname, workers }).workers.map((w) => w.worker)
    expect(of("prod", "a.example")).toEqual(["wb"])
    expect(of("prod", "b.example")).toEqual(["wc", "wd"])
    expect(of("dev", "a.example")).toEqual(["wc"])
    expect(of("prod", undefined)).toEqual(["wb", "wc", "wd"])
    expect(of("", "a.example")).toEqual([])
  })

  it.prop(
    "agree with the registry's isPlaceable",
    [
      fc.integer({ min: 1000, max: 60_000 }),
      fc.oneof(fc.integer({ min: -20_000, max: 20_000 }), fc.map(fc.integer({ min: -2, max: 2 }), (d) => ({ nearMinimum: d }))),
      fc.boolean(),
      fc.boolean()
    ],
    ([leaseMs, left, draining, degraded]) => {
      const leaseLeft = typeof left === "number" ? left : Math.ceil(Math.min(5000, leaseMs / 3)) + left.nearMinimum
      const worker = listed("w", { leaseExpiresAt: NOW + leaseLeft, draining, degraded })
      const record: WorkerRecord = { ...worker, incarnation: "i", namespaces: [], nackWindowStart: 0, nackCount: 0, callerKey: undefined }
      const policy = { leaseMs, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: leaseMs }
      const [verdict] = placeOf({ workers: [worker], leaseMs }).workers
      expect(verdict!.exclusions.length === 0).toBe(isPlaceable(record, NOW, policy, []))
    }
  )

  it("none listed for the namespace, or none placeable, is said as such", () => {
    expect(placeOf({ workers: [listed("wa", { namespaces: ["/threads"] })] }).outcome).toEqual({ _tag: "NoWorkers" })
    expect(placeOf({ workers: [listed("wa", { draining: true })] }).outcome).toEqual({ _tag: "NoCandidates" })
  })
})

describe("the choice", () => {
  it("prefers the rendezvous winner and keeps it while its headroom is at least mean / balanceFactor", () => {
    const workers = ["wa", "wb", "wc"].map((w) => listed(w))
    const winner = [...workers].sort((a, b) => (rendezvousScore("10.0.0.7", b.worker) > rendezvousScore("10.0.0.7", a.worker) ? 1 : -1))[0]!
    const outcome = chosenOf({ workers, affinity: "10.0.0.7" })
    expect(outcome).toMatchObject({
      preferred: winner.worker,
      preferredBy: "rendezvous",
      meanHeadroom: 10,
      balanceFactor: 1.25,
      threshold: 8,
      holds: true,
      odds: [{ worker: winner.worker, probability: 1 }]
    })
  })

  it("prefers the caller's worker while it is a candidate, and says when it is not", () => {
    const workers = [listed("wa"), listed("wb"), listed("wc", { draining: true })]
    expect(chosenOf({ workers, caller: "wb" })).toMatchObject({ preferred: "wb", preferredBy: "caller", holds: true })
    expect(placeOf({ workers, caller: "wb" }).caller).toEqual({ worker: "wb", status: "candidate" })
    expect(placeOf({ workers, caller: "wc" }).caller).toEqual({ worker: "wc", status: "not-candidate" })
    expect(placeOf({ workers, caller: "zz" }).caller).toEqual({ worker: "zz", status: "not-listed" })
    expect(chosenOf({ workers, caller: "wc" }).preferredBy).toBe("rendezvous")
  })

  it("falls back to two random candidates, the one with more headroom winning, i on a tie", () => {
    // wa (headroom 1) is the caller's, below 2 / 1.25 = 1.6. Ordered pairs (i, j):
    // (wa,wb) wb, (wa,wc) wc, (wb,wa) wb, (wb,wc) wc, (wc,wa) wc, (wc,wb) wc.
    const workers = [listed("wa", { headroom: 1 }), listed("wb", { headroom: 2 }), listed("wc", { headroom: 3 })]
    expect(chosenOf({ workers, caller: "wa" })).toMatchObject({
      preferred: "wa",
      holds: false,
      threshold: 1.6,
      odds: [{ worker: "wb", probability: 2 / 6 }, { worker: "wc", probability: 4 / 6 }]
    })
    // Equal headroom: whoever is drawn first wins, so every one of them can be picked.
    const tied = [listed("wa", { headroom: 0 }), listed("wb", { headroom: 5 }), listed("wc", { headroom: 5 })]
    expect(chosenOf({ workers: tied, caller: "wa" }).odds).toEqual([{ worker: "wb", probability: 0.5 }, { worker: "wc", probability: 0.5 }])
  })
})

const candidates = fc.map(
  fc.uniqueArray(fc.record({ worker: fc.stringMatching(/^[A-Za-z0-9._~-]{1,8}$/), headroom: fc.integer({ min: 0, max: 20 }) }), {
    minLength: 1,
    maxLength: 7,
    selector: (c) => c.worker
  }),
  (list): ReadonlyArray<Candidate> => [...list].sort(byWorkerId)
)
const unit = fc.double({ min: 0, max: 1, maxExcluded: true })

describe("the odds", () => {
  it.prop(
    "cover exactly the workers choosePlacement picks, for any r1 and r2",
    [candidates, fc.string(), fc.option(fc.string(), { nil: undefined }), fc.double({ min: 1, max: 3 }), unit, unit],
    ([list, affinity, caller, balanceFactor, r1, r2]) => {
      const workers = list.map((c) => listed(c.worker, { headroom: c.headroom }))
      const outcome = chosenOf({ workers, affinity, caller, balanceFactor })
      const picked = choosePlacement({ candidates: list, caller, affinity, balanceFactor, r1, r2 })
      expect(outcome.odds.map((o) => o.worker)).toContain(picked)
      expect(outcome.odds.reduce((sum, o) => sum + o.probability, 0)).toBeCloseTo(1, 9)
      if (outcome.holds) expect(outcome.odds).toEqual([{ worker: outcome.preferred, probability: 1 }])
    }
  )

  it.prop("are the share of ordered pairs (i, j) each candidate wins (docs/protocol.md 'Resolution' step 6)", [candidates], ([list]) => {
    const n = list.length
    const wins = new Map<string, number>()
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        if (i === j) continue
        const winner = list[j]!.headroom > list[i]!.headroom ? list[j]! : list[i]!
        wins.set(winner.worker, (wins.get(winner.worker) ?? 0) + 1)
      }
    }
    // A preference that fails: the lowest headroom, below the mean, with balanceFactor 1.
    const lowest = list.reduce((low, c) => (c.headroom < low.headroom ? c : low))
    if (list.every((c) => c.headroom === lowest.headroom)) return
    const odds = placementOdds(list, lowest.worker, 1)
    expect(new Map(odds.map((o) => [o.worker, o.probability]))).toEqual(new Map([...wins].map(([w, k]) => [w, k / (n * (n - 1))])))
  })
})
