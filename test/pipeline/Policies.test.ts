// The request path's retry policy (docs/proxy.md "Retries"), as `Effect.retry` applies it in
// Deliver.ts: a stale send is resolved again once with the stale check, and nothing else is
// retried, for any sequence of outcomes.
import { describe, expect, it } from "@effect/vitest"
import { Data, Effect, Exit } from "effect"
import { RE_RESOLVE } from "../../src/pipeline/Policies.js"
import * as fc from "../support/Arbitraries.js"

class StaleResolve extends Data.TaggedError("StaleResolve")<{}> {}
class RefusedBy extends Data.TaggedError("RefusedBy")<{}> {}
class Other extends Data.TaggedError("Other")<{}> {}
const SIGNALS = { StaleResolve, RefusedBy, Other }
type Tag = keyof typeof SIGNALS

/** An attempt that fails with the given reasons, one per run, then succeeds with the number of runs. */
const scripted = (failures: ReadonlyArray<Tag>) => {
  let runs = 0
  const effect = Effect.suspend(() => {
    const n = runs++
    return n < failures.length ? Effect.fail({ why: new SIGNALS[failures[n]!]() }) : Effect.succeed(n)
  })
  return { effect, runs: () => runs }
}

describe("RE_RESOLVE", () => {
  it("a stale send is resolved again once with the stale check (Deliver.ts sends the next as is)", () => {
    const stale = scripted(["StaleResolve", "StaleResolve", "StaleResolve"])
    const exit = Effect.runSyncExit(Effect.retry(stale.effect, RE_RESOLVE))
    expect(stale.runs()).toBe(2)
    expect(exit).toEqual(Exit.fail({ why: new StaleResolve() }))
    const once = scripted(["StaleResolve"])
    expect(Effect.runSyncExit(Effect.retry(once.effect, RE_RESOLVE))).toEqual(Exit.succeed(1))
  })

  it("retries nothing but a stale send, for any outcomes", () =>
    fc.assertProperty(fc.array(fc.constantFrom<Tag>("StaleResolve", "RefusedBy", "Other"), { maxLength: 6 }), (failures) => {
      const attempt = scripted(failures)
      const exit = Effect.runSyncExit(Effect.retry(attempt.effect, RE_RESOLVE))
      // Runs until the first failure that is not stale, or the second stale one.
      const firstOther = failures.findIndex((tag) => tag !== "StaleResolve")
      const expectedRuns = Math.min(firstOther === -1 ? failures.length + 1 : firstOther + 1, 2)
      expect(attempt.runs()).toBe(Math.min(expectedRuns, failures.length + 1))
      expect(Exit.isSuccess(exit)).toBe(attempt.runs() > failures.length)
    }))
})
