// Elapsed time, read from the monotonic side of Effect's `Clock` (hrtime; TestClock in tests):
// a wall clock that steps (NTP, a VM resumed) must not fire a timer early or skip a deadline.
import type { Clock } from "effect"

/** Milliseconds on a clock that never steps; only differences of two readings mean anything. */
export const monotonicMillis = (clock: Clock.Clock): number => Number(clock.monotonicTimeNanosUnsafe()) / 1e6

/**
 * The same clock in whole microseconds, exact as a number (hrtime counts from an arbitrary
 * origin, far below 2^53 µs); rounded, since TestClock's nanoseconds come from a float.
 */
export const monotonicMicros = (clock: Clock.Clock): number => Number((clock.monotonicTimeNanosUnsafe() + 500n) / 1000n)
