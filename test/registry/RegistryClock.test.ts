// The registry's one clock on TestClock (docs/protocol.md "Time"): the registry's time sampled
// and carried on by the monotonic clock, never the wall clock; a process whose wall clock is
// out of bound, or that has no fresh sample, gets no time (so makes no registry writes), says
// so, counts it, and resumes by itself.
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { RegistryUnavailable } from "../../src/Errors.js"
import { Metrics, type MetricsService } from "../../src/observe/Metrics.js"
import type { RegistryBackend } from "../../src/registry/RegistryBackend.js"
import { makeMemoryBackend } from "../../src/registry/Memory.js"
import { makeSampledClock, CLOCK_SAMPLE_AGAIN_MS, CLOCK_SAMPLE_EVERY_MS, CLOCK_SAMPLE_STALE_MS } from "../../src/registry/RegistryClock.js"
import { skewedClock } from "../support/SkewedClock.js"

const T = 1_800_000_000_000
const MAX_OFFSET_MS = 1000
const policy = { leaseMs: 15_000, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: 15_000 }

/** A registry whose time is the test's own (plus `registryAhead`), reachable while `up`. */
const registryAt = (link: { up: boolean; registryAhead: number; delayMs: number }) =>
  Effect.map(Clock.Clock, (clock): RegistryBackend => ({
    ...makeMemoryBackend(1, policy),
    time: Effect.suspend(() =>
      link.up
        ? Effect.as(Effect.sleep(link.delayMs), clock.currentTimeMillisUnsafe() + link.registryAhead)
        : Effect.fail(new RegistryUnavailable({ cause: "cut" }))
    )
  }))

/** The sampled clock of a process whose wall clock is `skew.ms` off, and what it counted. */
const processClock = (backend: RegistryBackend, skew: { ms: number }) =>
  Effect.gen(function* () {
    const counted = { outOfBound: 0, offsets: [] as Array<number> }
    const metrics = { clockOffset: (ms: number) => counted.offsets.push(ms), clockOutOfBound: () => counted.outOfBound++ } as unknown as MetricsService
    const base = yield* Clock.Clock
    const clock = yield* makeSampledClock(backend, MAX_OFFSET_MS).pipe(
      Effect.provide(Layer.succeed(Metrics, metrics)),
      Effect.provideService(Clock.Clock, skewedClock(base, () => skew.ms))
    )
    return { clock, counted }
  })

describe("the registry clock", () => {
  it.effect("tells the registry's time, not this process's wall clock", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const { clock } = yield* processClock(yield* registryAt({ up: true, registryAhead: 0, delayMs: 0 }), { ms: 900 })
      expect(yield* clock.now).toBe(T)
      yield* TestClock.adjust(1234)
      expect(yield* clock.now).toBe(T + 1234)
    }))

  it.effect("carries the last sample on by the monotonic clock while the registry is out of reach", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const link = { up: true, registryAhead: 300, delayMs: 0 }
      const { clock } = yield* processClock(yield* registryAt(link), { ms: 0 })
      link.up = false
      yield* TestClock.adjust(CLOCK_SAMPLE_STALE_MS)
      expect(yield* clock.now).toBe(T + 300 + CLOCK_SAMPLE_STALE_MS)
      yield* TestClock.adjust(1)
      expect(yield* Effect.flip(clock.now)).toBeInstanceOf(RegistryUnavailable)
      link.up = true
      yield* TestClock.adjust(CLOCK_SAMPLE_AGAIN_MS)
      expect(yield* clock.now).toBe(T + 300 + CLOCK_SAMPLE_STALE_MS + 1 + CLOCK_SAMPLE_AGAIN_MS)
    }))

  it.effect("gives no time while the wall clock is out of bound, either way, and resumes by itself", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const skew = { ms: 0 }
      const { clock, counted } = yield* processClock(yield* registryAt({ up: true, registryAhead: 0, delayMs: 0 }), skew)
      skew.ms = 20_000
      expect(yield* Effect.flip(clock.now)).toMatchObject({ _tag: "ClockOffsetTooLarge", offsetMs: 20_000 })
      expect(yield* clock.reading).toEqual({ _tag: "OutOfBound", offsetMs: 20_000 })
      yield* TestClock.adjust(CLOCK_SAMPLE_EVERY_MS)
      expect(counted.outOfBound).toBe(1)
      skew.ms = -(MAX_OFFSET_MS + 1)
      expect(yield* Effect.flip(clock.now)).toMatchObject({ _tag: "ClockOffsetTooLarge", offsetMs: -(MAX_OFFSET_MS + 1) })
      skew.ms = -MAX_OFFSET_MS
      expect(yield* clock.now).toBe(T + CLOCK_SAMPLE_EVERY_MS)
      yield* TestClock.adjust(CLOCK_SAMPLE_EVERY_MS)
      expect(counted.offsets.at(-1)).toBe(-MAX_OFFSET_MS)
    }))

  it.effect("a registry whose own clock is off puts every process out of bound (fails closed)", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const link = { up: true, registryAhead: 0, delayMs: 0 }
      const { clock } = yield* processClock(yield* registryAt(link), { ms: 0 })
      link.registryAhead = -3_600_000
      yield* TestClock.adjust(CLOCK_SAMPLE_EVERY_MS)
      expect(yield* Effect.flip(clock.now)).toMatchObject({ _tag: "ClockOffsetTooLarge", offsetMs: 3_600_000 })
    }))

  it.effect("does not count a sample whose round trip is longer than half the bound", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const link = { up: true, registryAhead: 0, delayMs: MAX_OFFSET_MS / 2 + 1 }
      const made = yield* Effect.forkChild(processClock(yield* registryAt(link), { ms: 0 }))
      yield* TestClock.adjust(3 * (MAX_OFFSET_MS / 2 + 1))
      const { clock } = yield* Fiber.join(made)
      expect(yield* clock.reading).toEqual({ _tag: "Unsampled" })
      link.delayMs = MAX_OFFSET_MS / 2
      yield* TestClock.adjust(CLOCK_SAMPLE_AGAIN_MS + MAX_OFFSET_MS / 2)
      // Taken at the round trip's midpoint: the registry answered its time as of the send.
      const now = yield* clock.now
      expect(now).toBe(yield* Clock.currentTimeMillis.pipe(Effect.map((t) => t - MAX_OFFSET_MS / 2 + MAX_OFFSET_MS / 4)))
    }))
})
