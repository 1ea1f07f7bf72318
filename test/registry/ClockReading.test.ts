// The registry clock's arithmetic (docs/protocol.md "Time"): a sample at its round trip's
// midpoint, carried on by the monotonic clock, the wall clock only compared.
import { describe, expect, it } from "@effect/vitest"
import { readClock, sampleOf } from "../../src/registry/ClockReading.js"
import * as Gen from "../support/Arbitraries.js"

const bounds = { maxOffsetMs: 1000, staleMs: 6000 }
const T = 1_800_000_000_000

describe("the registry clock's reading", () => {
  it("takes a sample at the midpoint of its round trip", () => {
    expect(sampleOf(100, 140, T * 1000)).toEqual({ registryMicros: T * 1000 + 20, monotonicMicros: 140 })
  })

  it.prop(
    "carries the sample on by the monotonic clock, whatever the wall clock says within the bound",
    [Gen.integer({ min: 0, max: 6000 }), Gen.integer({ min: -1000, max: 1000 })],
    ([elapsed, offset]) => {
      const reading = readClock({ registryMicros: T * 1000, monotonicMicros: 50 }, 50 + elapsed * 1000, T + elapsed + offset, bounds)
      expect(reading).toEqual({ _tag: "InBound", nowMs: T + elapsed, offsetMs: offset })
    }
  )

  it("is out of bound past the offset, either way, and tells the offset", () => {
    const sample = { registryMicros: T * 1000, monotonicMicros: 0 }
    expect(readClock(sample, 10_000, T + 10 + 1001, bounds)).toEqual({ _tag: "OutOfBound", offsetMs: 1001 })
    expect(readClock(sample, 10_000, T + 10 - 1001, bounds)).toEqual({ _tag: "OutOfBound", offsetMs: -1001 })
  })

  it("has no time without a sample, or with one older than the stale bound", () => {
    expect(readClock(undefined, 0, T, bounds)).toEqual({ _tag: "Unsampled" })
    expect(readClock({ registryMicros: T * 1000, monotonicMicros: 0 }, 6_000_001, T + 6000, bounds)).toEqual({ _tag: "Unsampled" })
    expect(readClock({ registryMicros: T * 1000, monotonicMicros: 0 }, 6_000_000, T + 6000, bounds)._tag).toBe("InBound")
  })

  it("answers whole milliseconds (epoch floors are the time followed by six zeros)", () => {
    expect(readClock({ registryMicros: T * 1000 + 750, monotonicMicros: 0 }, 249, T + 1, bounds)).toEqual({ _tag: "InBound", nowMs: T, offsetMs: 1 })
    expect(readClock({ registryMicros: T * 1000 + 750, monotonicMicros: 0 }, 250, T + 1, bounds)).toEqual({ _tag: "InBound", nowMs: T + 1, offsetMs: 0 })
  })
})
