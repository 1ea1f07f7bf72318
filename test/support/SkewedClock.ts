// A Pinboard process's clocks over the test's own (TestClock under it.effect): its wall clock
// `skewMs()` away, stepping whenever that changes, while its monotonic clock and its sleeps are
// the test's. That is what a clock step (NTP, a VM resumed) does to a real process.
import { Clock, Effect } from "effect"

export const skewedClock = (base: Clock.Clock, skewMs: () => number): Clock.Clock => {
  const wall = () => base.unsafeCurrentTimeMillis() + skewMs()
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: wall,
    currentTimeMillis: Effect.sync(wall),
    unsafeCurrentTimeNanos: () => base.unsafeCurrentTimeNanos(),
    currentTimeNanos: Effect.sync(() => base.unsafeCurrentTimeNanos()),
    sleep: (duration) => base.sleep(duration)
  }
}
