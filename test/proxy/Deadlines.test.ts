// Deadlines: timers on the Clock, one lane per duration (driven here by TestClock).
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { makeDeadlines } from "../../src/proxy/Deadlines.js"

describe("Deadlines", () => {
  it.scoped("fires a timer when its duration has passed, not before", () =>
    Effect.gen(function* () {
      const deadlines = yield* makeDeadlines
      const fired: Array<string> = []
      deadlines.start(5_000, () => fired.push("a"))
      yield* TestClock.adjust(4_999)
      expect(fired).toEqual([])
      yield* TestClock.adjust(1)
      expect(fired).toEqual(["a"])
    })
  )
})
