// DESIGN 5 steps 5 and 6 as properties of the pure placement choice.
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { byWorkerId, choosePlacement, rendezvousScore, type Candidate } from "../../src/registry/Placement.js"

const candidates = fc
  .uniqueArray(
    fc.record({ worker: fc.stringMatching(/^[A-Za-z0-9._~-]{1,8}$/), headroom: fc.double({ min: 0, max: 1000, noNaN: true }) }),
    { minLength: 1, maxLength: 8, selector: (c) => c.worker }
  )
  .map((list) => [...list].sort(byWorkerId))
const unit = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })

const choice = (list: ReadonlyArray<Candidate>, extra: Partial<Parameters<typeof choosePlacement>[0]> = {}) =>
  choosePlacement({ candidates: list, caller: undefined, affinity: "10.0.0.1", balanceFactor: 1.25, r1: 0, r2: 0, ...extra })

const mean = (list: ReadonlyArray<Candidate>) => list.reduce((sum, c) => sum + c.headroom, 0) / list.length
const rendezvousPick = (list: ReadonlyArray<Candidate>, affinity: string) =>
  list.reduce((best, c) => (rendezvousScore(affinity, c.worker) > rendezvousScore(affinity, best.worker) ? c : best))

describe("placement choice", () => {
  it("places nothing without candidates", () => {
    expect(choice([])).toBeUndefined()
  })

  it.prop("always picks a candidate", [candidates, fc.string(), fc.option(fc.string(), { nil: undefined }), unit, unit], ([list, affinity, caller, r1, r2]) => {
    expect(list.map((c) => c.worker)).toContain(choice(list, { affinity, caller, r1, r2 }))
  })

  it.prop("a caller's own worker wins while its headroom is at least mean / balanceFactor", [candidates, unit, unit], ([list, r1, r2]) => {
    for (const caller of list) {
      const picked = choice(list, { caller: caller.worker, r1, r2 })
      if (caller.headroom >= mean(list) / 1.25) expect(picked).toBe(caller.worker)
    }
  })

  it.prop("otherwise the rendezvous winner, on the greatest sha1(affinity \\n worker)", [candidates, fc.string(), unit, unit], ([list, affinity, r1, r2]) => {
    const preferred = rendezvousPick(list, affinity)
    if (preferred.headroom >= mean(list) / 1.25) expect(choice(list, { affinity, r1, r2 })).toBe(preferred.worker)
  })

  it.prop("below the threshold, the higher headroom of candidates i = floor(r1 n) and j (skipping i)", [candidates, fc.string(), unit, unit], ([list, affinity, r1, r2]) => {
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
