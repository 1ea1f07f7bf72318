// The registry clock's arithmetic (docs/protocol.md "Time"), pure: a sample of the registry's
// time taken over one round trip, and what it reads later by the monotonic clock, judged
// against this process's wall clock. Whole microseconds, so that the sums are exact.

/** The registry's time at the monotonic instant `monotonicMicros`. */
export interface ClockSample {
  readonly registryMicros: number
  readonly monotonicMicros: number
}

/** What the registry clock tells now. */
export type ClockReading =
  | { readonly _tag: "InBound"; readonly nowMs: number; readonly offsetMs: number }
  | { readonly _tag: "OutOfBound"; readonly offsetMs: number }
  | { readonly _tag: "Unsampled" }

/**
 * The registry answered `registryMicros` somewhere inside the round trip from `sentMicros` to
 * `receivedMicros` (monotonic): taken at the midpoint, the sample is off by at most half the trip.
 */
export const sampleOf = (sentMicros: number, receivedMicros: number, registryMicros: number): ClockSample => ({
  registryMicros: registryMicros + Math.floor((receivedMicros - sentMicros) / 2),
  monotonicMicros: receivedMicros
})

/** The registry's time (µs) at `monotonicMicros`, carried on from the sample by the monotonic clock. */
export const carriedOn = (sample: ClockSample, monotonicMicros: number): number =>
  sample.registryMicros + (monotonicMicros - sample.monotonicMicros)

/**
 * The registry's time now, in whole ms, while the sample is younger than `staleMs` and the
 * wall clock is within `maxOffsetMs` of it. The wall clock is only compared, never read as
 * the time: a step of it (or a pause the monotonic clock missed) shows as an offset at once.
 */
export const readClock = (
  sample: ClockSample | undefined,
  monotonicMicros: number,
  wallMs: number,
  bounds: { readonly maxOffsetMs: number; readonly staleMs: number }
): ClockReading => {
  if (sample === undefined || monotonicMicros - sample.monotonicMicros > bounds.staleMs * 1000) return { _tag: "Unsampled" }
  const nowMs = Math.floor(carriedOn(sample, monotonicMicros) / 1000)
  const offsetMs = wallMs - nowMs
  return Math.abs(offsetMs) > bounds.maxOffsetMs ? { _tag: "OutOfBound", offsetMs } : { _tag: "InBound", nowMs, offsetMs }
}
