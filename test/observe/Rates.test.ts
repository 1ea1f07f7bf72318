// The fleet page's rate ring (docs/operations.md "The fleet page"): totals counted per answer,
// sampled into a fixed ring, rates as differences between neighbouring samples over the time
// really elapsed, oldest first, the oldest dropped once full; the sampler on Clock.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { countAnswer, emptyTotals, makeRateRing, ratesOf, recordSample, sampleForever, RATE_SAMPLE_EVERY_MS } from "../../src/observe/Rates.js"

describe("answered totals", () => {
  it("count every answer as a request and 5xx (only) as an error", () => {
    const totals = emptyTotals()
    for (const status of [101, 200, 302, 404, 499, 500, 502, 503, 504]) countAnswer(totals, status)
    expect(totals).toEqual({ requests: 9, errors: 4 })
  })
})

describe("the rate ring", () => {
  it("has no rates before two samples", () => {
    const ring = makeRateRing(3)
    expect(ratesOf(ring, 1000)).toEqual({ intervalMs: 1000, kept: 3, endsAt: null, requests: [], errors: [] })
    recordSample(ring, 5_000, { requests: 7, errors: 1 })
    expect(ratesOf(ring, 1000)).toEqual({ intervalMs: 1000, kept: 3, endsAt: 5_000, requests: [], errors: [] })
  })

  it("gives per-second rates between neighbouring samples, over the time elapsed, oldest first", () => {
    const ring = makeRateRing(5)
    recordSample(ring, 10_000, { requests: 0, errors: 0 })
    recordSample(ring, 11_000, { requests: 30, errors: 3 })
    recordSample(ring, 13_000, { requests: 50, errors: 3 }) // a late sample: 20 over 2 s
    recordSample(ring, 14_000, { requests: 51, errors: 4 })
    expect(ratesOf(ring, 1000)).toEqual({ intervalMs: 1000, kept: 5, endsAt: 14_000, requests: [30, 10, 1], errors: [3, 0, 1] })
  })

  it("keeps the last `kept` rates once full, wrapping around its arrays", () => {
    const ring = makeRateRing(3)
    for (let s = 0; s <= 10; s++) recordSample(ring, s * 1000, { requests: s * s, errors: s })
    // samples 7..10: 49, 64, 81, 100
    expect(ratesOf(ring, 1000)).toMatchObject({ endsAt: 10_000, requests: [15, 17, 19], errors: [1, 1, 1] })
  })

  it("rounds to hundredths and reads two samples at the same instant as 0", () => {
    const ring = makeRateRing(3)
    recordSample(ring, 0, { requests: 0, errors: 0 })
    recordSample(ring, 3000, { requests: 1, errors: 0 })
    recordSample(ring, 3000, { requests: 2, errors: 1 })
    expect(ratesOf(ring, 1000)).toMatchObject({ requests: [0.33, 0], errors: [0, 0] })
  })

  it.effect("is sampled at once and then every second by Clock", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_000_000)
      const ring = makeRateRing(300)
      const totals = emptyTotals()
      const sampler = yield* Effect.forkChild(sampleForever(ring, totals))
      yield* TestClock.adjust(0)
      expect(ring.filled).toBe(1)
      for (let s = 0; s < 4; s++) {
        for (let i = 0; i < 10 * (s + 1); i++) countAnswer(totals, i === 0 ? 500 : 200)
        yield* TestClock.adjust(RATE_SAMPLE_EVERY_MS)
      }
      expect(ratesOf(ring, RATE_SAMPLE_EVERY_MS)).toEqual({
        intervalMs: 1000,
        kept: 300,
        endsAt: 1_004_000,
        requests: [10, 20, 30, 40],
        errors: [1, 1, 1, 1]
      })
      yield* Fiber.interrupt(sampler)
    }))
})
