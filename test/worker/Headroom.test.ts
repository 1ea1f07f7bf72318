// The default headroom (docs/worker.md "Headroom"): an idle worker reports its free activation
// slots exactly; a delayed event loop reduces them, to 0 at 100 ms of delay. The histogram reads
// a timer's whole period, so an idle loop reads about 20 ms: that is not load.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { EVENT_LOOP_SAMPLE_MS, headroomOf, IDLE_DELAY_MS, makeDefaultHeadroom, SATURATED_DELAY_MS } from "../../src/worker/Headroom.js"
import { quietWindow, scaled } from "../support/Time.js"

/** The loop kept busy for `ms` at a time, `times` times in a row: each sample timer runs that late. */
const blockLoop = (ms: number, times: number) =>
  new Promise<void>((resolve) => {
    let left = times
    const busy = () => {
      const until = performance.now() + ms
      while (performance.now() < until) {
        // the loop is blocked
      }
      if (--left === 0) resolve()
      else setTimeout(busy, 0)
    }
    setTimeout(busy, 0)
  })

/**
 * Readings 100 ms of idle real time apart until one is `expected`, or the last one after 3 s: on
 * a busy machine (the test files run side by side) a window can see the process descheduled.
 */
const idleReading = async (read: () => number, expected: number): Promise<number> => {
  const deadline = performance.now() + scaled(3000)
  for (;;) {
    await quietWindow(100)
    const reading = read()
    if (reading === expected || performance.now() > deadline) return reading
  }
}

/** A mean delay: any finite number of ms from 0 to 500. */
const delay = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 500 }))

describe("headroomOf", () => {
  it("an idle loop (the sampling period, plus jitter) leaves the free slots whole", () => {
    expect(headroomOf(994, EVENT_LOOP_SAMPLE_MS)).toBe(994)
    expect(headroomOf(994, 20.26)).toBe(994)
    expect(headroomOf(994, EVENT_LOOP_SAMPLE_MS + IDLE_DELAY_MS)).toBe(994)
    // No sample since the last reading.
    expect(headroomOf(994, Number.NaN)).toBe(994)
  })

  it("a delayed loop reduces them in proportion, to 0 at SATURATED_DELAY_MS of delay", () => {
    const halfway = EVENT_LOOP_SAMPLE_MS + (IDLE_DELAY_MS + SATURATED_DELAY_MS) / 2
    expect(headroomOf(1000, halfway)).toBe(500)
    expect(headroomOf(1000, EVENT_LOOP_SAMPLE_MS + SATURATED_DELAY_MS)).toBe(0)
    expect(headroomOf(1000, 10 * SATURATED_DELAY_MS)).toBe(0)
  })

  it.prop("between 0 and the free slots, and never more as the delay grows", [Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 2000 })), delay, delay], ([free, a, b]) => {
    const [less, more] = a <= b ? [a, b] : [b, a]
    expect(headroomOf(free, less)).toBeGreaterThanOrEqual(headroomOf(free, more))
    expect(headroomOf(free, less)).toBeLessThanOrEqual(free)
    expect(headroomOf(free, more)).toBeGreaterThanOrEqual(0)
  })
})

describe("the default headroom on the real event loop", () => {
  it.effect("idle: the free slots exactly (1000 less 6 activations)", () =>
    Effect.gen(function* () {
      const headroom = yield* makeDefaultHeadroom(1000, () => 6)
      headroom()
      // Real time with nothing to do: the loop idles, which is what is measured.
      expect(yield* Effect.promise(() => idleReading(headroom, 994))).toBe(994)
    })
  )

  it.effect("a blocked loop reduces it", () =>
    Effect.gen(function* () {
      const headroom = yield* makeDefaultHeadroom(1000, () => 6)
      headroom()
      yield* Effect.promise(() => blockLoop(80, 6))
      const loaded = headroom()
      // About 60 ms of delay beyond the sampling period: a little less than half the slots.
      expect(loaded).toBeLessThan(700)
      expect(loaded).toBeGreaterThanOrEqual(0)
    })
  )
})
