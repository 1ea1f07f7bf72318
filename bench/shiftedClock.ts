// A Clock some way off the wall clock, for benchmarks that must place a bucket's cold start
// (one lease from its first use) in the past before they measure.
import { Clock, Effect } from "effect"

/** A Clock `offsetMs` away from the wall clock; sleeps (and measures elapsed time) as the real one. */
export const shiftedClock = (offsetMs: number): Clock.Clock => {
  const base = Clock.Clock.defaultValue()
  const millis = () => Date.now() + offsetMs
  return {
    currentTimeMillisUnsafe: millis,
    currentTimeMillis: Effect.sync(millis),
    currentTimeNanosUnsafe: () => BigInt(millis()) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(millis()) * 1_000_000n),
    monotonicTimeNanosUnsafe: () => base.monotonicTimeNanosUnsafe(),
    monotonicTimeNanos: base.monotonicTimeNanos,
    sleep: (duration) => base.sleep(duration)
  }
}
