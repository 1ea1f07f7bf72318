// A Pinboard process's clocks over the test's own (TestClock under it.effect): its wall clock
// `skewMs()` away, stepping whenever that changes, while its monotonic clock and its sleeps are
// the test's. That is what a clock step (NTP, a VM resumed) does to a real process.
import { Clock, Effect } from "effect"

export const skewedClock = (base: Clock.Clock, skewMs: () => number): Clock.Clock => {
  const wall = () => base.currentTimeMillisUnsafe() + skewMs()
  return {
    currentTimeMillisUnsafe: wall,
    currentTimeMillis: Effect.sync(wall),
    currentTimeNanosUnsafe: () => base.currentTimeNanosUnsafe(),
    currentTimeNanos: Effect.sync(() => base.currentTimeNanosUnsafe()),
    monotonicTimeNanosUnsafe: () => base.monotonicTimeNanosUnsafe(),
    monotonicTimeNanos: Effect.sync(() => base.monotonicTimeNanosUnsafe()),
    sleep: (duration) => base.sleep(duration)
  }
}
