// The request path's retry policies (docs/proxy.md
// "Retries") and how they are applied: `retryAfterFailure` is `Effect.retry` with the
// schedule's driver made only after a first failure, so it must retry exactly as
// `Effect.retry` does, for any sequence of outcomes and any of the policies.
import { describe, expect, it } from "@effect/vitest"
import { Data, Effect, Exit, Schedule } from "effect"
import { RE_RESOLVE, REFUSAL_RE_PLACE, retryAfterFailure } from "../../src/pipeline/Policies.js"
import * as fc from "../support/Arbitraries.js"

class StaleResolve extends Data.TaggedError("StaleResolve")<{}> {}
class RefusedBy extends Data.TaggedError("RefusedBy")<{}> {}
class Other extends Data.TaggedError("Other")<{}> {}
const SIGNALS = { StaleResolve, RefusedBy, Other }
type Tag = keyof typeof SIGNALS

/** An effect that fails with the given tags, one per run, then succeeds with the number of runs. */
const scripted = (failures: ReadonlyArray<Tag>) => {
  let runs = 0
  const effect = Effect.suspend(() => {
    const n = runs++
    return n < failures.length ? Effect.fail(new SIGNALS[failures[n]!]()) : Effect.succeed(n)
  })
  return { effect, runs: () => runs }
}

const policies: Record<string, Schedule.Schedule<unknown, { readonly _tag: string }>> = {
  RE_RESOLVE,
  REFUSAL_RE_PLACE,
  "recurs(0)": Schedule.recurs(0),
  "recurs(3)": Schedule.recurs(3)
}

describe("retry policies", () => {
  it("retryAfterFailure retries exactly as Effect.retry, for any outcomes and policy", () =>
    fc.assertProperty(
      fc.tuple(fc.array(fc.constantFrom("StaleResolve", "RefusedBy", "Other"), { maxLength: 6 }), fc.constantFrom(...Object.keys(policies))),
      ([failures, name]) => {
        const policy = policies[name]!
        const viaRetry = scripted(failures)
        const viaAfterFailure = scripted(failures)
        const expected = Effect.runSyncExit(Effect.retry(viaRetry.effect, policy))
        const actual = Effect.runSyncExit(retryAfterFailure(viaAfterFailure.effect, policy))
        expect(actual).toEqual(expected)
        expect(viaAfterFailure.runs()).toBe(viaRetry.runs())
      }
    ))

  it("RE_RESOLVE: a stale send is resolved again once with the stale check (Deliver.ts sends the next as is); no other error is retried", () => {
    const stale = scripted(["StaleResolve", "StaleResolve", "StaleResolve"])
    const exit = Effect.runSyncExit(retryAfterFailure(stale.effect, RE_RESOLVE))
    expect(stale.runs()).toBe(2)
    expect(Exit.isFailure(exit)).toBe(true)
    const other = scripted(["StaleResolve", "RefusedBy"])
    Effect.runSyncExit(retryAfterFailure(other.effect, RE_RESOLVE))
    expect(other.runs()).toBe(2)
  })

  it("REFUSAL_RE_PLACE: one re-place after a refusal, none after anything else", () => {
    const refused = scripted(["RefusedBy", "RefusedBy"])
    expect(Exit.isFailure(Effect.runSyncExit(retryAfterFailure(refused.effect, REFUSAL_RE_PLACE)))).toBe(true)
    expect(refused.runs()).toBe(2)
    const once = scripted(["RefusedBy"])
    expect(Effect.runSyncExit(retryAfterFailure(once.effect, REFUSAL_RE_PLACE))).toEqual(Exit.succeed(1))
    const stale = scripted(["StaleResolve"])
    Effect.runSyncExit(retryAfterFailure(stale.effect, REFUSAL_RE_PLACE))
    expect(stale.runs()).toBe(1)
  })
})
