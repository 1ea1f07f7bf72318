// A Clock some way off the wall clock, for benchmarks that must place a bucket's cold start
// (one lease from its first use) in the past before they measure.
import { Clock, Effect } from "effect"

/** A Clock `offsetMs` away from the wall clock; sleeps as the real one. */
export const shiftedClock = (offsetMs: number): Clock.Clock => {
  const base = Clock.make()
  const millis = () => Date.now() + offsetMs
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: millis,
    currentTimeMillis: Effect.sync(millis),
    unsafeCurrentTimeNanos: () => BigInt(millis()) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(millis()) * 1_000_000n),
    sleep: (duration) => base.sleep(duration)
  }
}
