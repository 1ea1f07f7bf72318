// afterStep: a step that decided at once is continued at once; any other goes through flatMap.
// The outcome is always the one Effect.flatMap gives.
import { describe, expect, it } from "@effect/vitest"
import { Data, Effect, Result } from "effect"
import { afterStep } from "../../src/pipeline/steps/AfterStep.js"

class Refused extends Data.TaggedError("Refused")<{}> {}

// A Result is no longer an Effect (Effect 4): afterStep takes it as one that decided at once,
// and Effect.flatMap takes it as Effect.fromResult.
const steps: ReadonlyArray<[string, Effect.Effect<number, Refused> | Result.Result<number, Refused>]> = [
  ["Effect.succeed", Effect.succeed(1)],
  ["Effect.fail", Effect.fail(new Refused())],
  ["Result.succeed", Result.succeed(1)],
  ["Result.fail", Result.fail(new Refused())],
  ["a tagged error as an Effect", new Refused()],
  ["Effect.sync", Effect.sync(() => 1)],
  ["an async step", Effect.callback<number>((resume) => void setImmediate(() => resume(Effect.succeed(1))))]
]

describe("afterStep", () => {
  for (const [name, step] of steps) {
    it.effect(`${name}: the same outcome as Effect.flatMap`, () =>
      Effect.gen(function* () {
        const then = (n: number) => Effect.succeed(n + 1)
        const asEffect = Result.isResult(step) ? Effect.fromResult(step) : step
        expect(yield* Effect.exit(afterStep(step, then))).toEqual(yield* Effect.exit(Effect.flatMap(asEffect, then)))
      })
    )
  }

  it("continues a step that decided at once without running it on a fiber; never continues a failure", () => {
    const seen: Array<number> = []
    const record = (n: number) => {
      seen.push(n)
      return Effect.void
    }
    afterStep(Effect.succeed(1), record)
    afterStep(Result.succeed(2), record)
    expect(seen).toEqual([1, 2])
    afterStep(Effect.fail(new Refused()), record)
    afterStep(Result.fail(new Refused()), record)
    afterStep(Effect.sync(() => 3), record)
    expect(seen).toEqual([1, 2])
  })
})
