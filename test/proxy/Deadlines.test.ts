// Deadlines: timers on the Clock, one lane per duration (driven here by TestClock).
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { makeDeadlines } from "../../src/proxy/Deadlines.js"

describe("Deadlines", () => {
  it.effect("fires a timer when its duration has passed, not before", () =>
    Effect.gen(function* () {
      const deadlines = yield* makeDeadlines
      const fired: Array<string> = []
      deadlines.timer(() => fired.push("a")).start(5_000)
      yield* TestClock.adjust(4_999)
      expect(fired).toEqual([])
      yield* TestClock.adjust(1)
      expect(fired).toEqual(["a"])
    })
  )

  it.effect("restart counts from now; cancel stops it; start moves it to another duration", () =>
    Effect.gen(function* () {
      const deadlines = yield* makeDeadlines
      const fired: Array<string> = []
      const a = deadlines.timer(() => fired.push("a"))
      const b = deadlines.timer(() => fired.push("b"))
      const c = deadlines.timer(() => fired.push("c"))
      a.start(1_000)
      b.start(1_000)
      c.start(1_000)
      yield* TestClock.adjust(900)
      a.restart()
      b.cancel()
      c.start(5_000)
      yield* TestClock.adjust(999)
      expect(fired).toEqual([])
      yield* TestClock.adjust(1)
      expect(fired).toEqual(["a"])
      yield* TestClock.adjust(3_999)
      expect(fired).toEqual(["a"])
      yield* TestClock.adjust(1)
      expect(fired).toEqual(["a", "c"])
    })
  )

  it.effect("a timer added to an idle lane wakes it", () =>
    Effect.gen(function* () {
      const deadlines = yield* makeDeadlines
      const fired: Array<number> = []
      const timer = deadlines.timer(() => fired.push(fired.length))
      timer.start(1_000)
      yield* TestClock.adjust(1_000)
      yield* TestClock.adjust(10_000)
      timer.start(1_000)
      yield* TestClock.adjust(999)
      expect(fired).toEqual([0])
      yield* TestClock.adjust(1)
      expect(fired).toEqual([0, 1])
    })
  )
})
