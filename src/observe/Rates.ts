// Requests and errors per second over the last minutes, for the fleet page (docs/operations.md
// "The fleet page"). A request costs two number increments (`AnsweredTotals`, bumped where
// Metrics.ts counts it); once a second a sampler copies the totals and the time into a ring
// of fixed arrays, and the rates are the differences between neighbouring samples. Each
// Pinboard process keeps its own ring: the rates are this replica's traffic only.
import { Duration, Effect, Schedule } from "effect"

/** Instance requests answered since start, and how many of them were 5xx (a worker's or Pinboard's own). */
export interface AnsweredTotals {
  requests: number
  errors: number
}

export const emptyTotals = (): AnsweredTotals => ({ requests: 0, errors: 0 })

/** A 5xx answer counts as an error: the server side failed, whoever wrote it. */
export const countAnswer = (totals: AnsweredTotals, status: number): void => {
  totals.requests++
  if (status >= 500) totals.errors++
}

/** Samples of the totals, oldest overwritten first. */
export interface RateRing {
  readonly times: Float64Array
  readonly requests: Float64Array
  readonly errors: Float64Array
  /** The slot the next sample goes to. */
  next: number
  /** How many slots hold a sample. */
  filled: number
}

/** Room for `rates` rates: one sample more than that. */
export const makeRateRing = (rates: number): RateRing => ({
  times: new Float64Array(rates + 1),
  requests: new Float64Array(rates + 1),
  errors: new Float64Array(rates + 1),
  next: 0,
  filled: 0
})

export const recordSample = (ring: RateRing, atMs: number, totals: AnsweredTotals): void => {
  ring.times[ring.next] = atMs
  ring.requests[ring.next] = totals.requests
  ring.errors[ring.next] = totals.errors
  ring.next = (ring.next + 1) % ring.times.length
  ring.filled = Math.min(ring.filled + 1, ring.times.length)
}

export interface RateSeries {
  /** The sampling period the series was taken at. */
  readonly intervalMs: number
  /** How many rates the series holds once full (the window is kept × intervalMs). */
  readonly kept: number
  /** When the newest sample was taken (ms since the epoch); null before the first one. */
  readonly endsAt: number | null
  /** Per second, oldest first, one value between each two neighbouring samples. */
  readonly requests: ReadonlyArray<number>
  readonly errors: ReadonlyArray<number>
}

/** Rates rounded to 0.01/s: finer says nothing on a page. */
const perSecond = (delta: number, elapsedMs: number): number => (elapsedMs > 0 ? Math.round((delta * 100_000) / elapsedMs) / 100 : 0)

/** The rates between neighbouring samples, oldest first (each over the time really elapsed between them). */
export const ratesOf = (ring: RateRing, intervalMs: number): RateSeries => {
  const size = ring.times.length
  const first = (ring.next - ring.filled + size) % size
  const requests: Array<number> = []
  const errors: Array<number> = []
  for (let k = 1; k < ring.filled; k++) {
    const before = (first + k - 1) % size
    const after = (first + k) % size
    const elapsed = ring.times[after]! - ring.times[before]!
    requests.push(perSecond(ring.requests[after]! - ring.requests[before]!, elapsed))
    errors.push(perSecond(ring.errors[after]! - ring.errors[before]!, elapsed))
  }
  const endsAt = ring.filled === 0 ? null : ring.times[(ring.next - 1 + size) % size]!
  return { intervalMs, kept: size - 1, endsAt, requests, errors }
}

/** One sample a second, five minutes of rates. */
export const RATE_SAMPLE_EVERY_MS = 1000
export const RATES_KEPT = 300
const sampleSchedule = Schedule.fixed(Duration.millis(RATE_SAMPLE_EVERY_MS))

/** Samples `totals` into `ring` now and then every RATE_SAMPLE_EVERY_MS, for as long as it runs. */
export const sampleForever = (ring: RateRing, totals: AnsweredTotals): Effect.Effect<void> =>
  Effect.clockWith((clock) => Effect.sync(() => recordSample(ring, clock.currentTimeMillisUnsafe(), totals))).pipe(
    Effect.repeat(sampleSchedule),
    Effect.asVoid
  )
