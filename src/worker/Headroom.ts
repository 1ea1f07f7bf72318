// The default headroom (docs/worker.md "Headroom"): free activation slots, reduced while the
// event loop is delayed. The delay is read from node's event-loop histogram, which records the
// whole interval between runs of a timer set every EVENT_LOOP_SAMPLE_MS: an idle loop reads the
// timer's own period (about 20 ms), so that period is taken off before the delay counts as load.
import { monitorEventLoopDelay } from "node:perf_hooks"
import { Effect, type Scope } from "effect"

/** How often the event-loop delay is sampled: real time, not Clock, for it is the real loop's delay. */
export const EVENT_LOOP_SAMPLE_MS = 20
/** Mean delay (beyond the sampling period) below which the loop counts as idle: timer jitter, not load. */
export const IDLE_DELAY_MS = 10
/** Mean delay (beyond the sampling period) at which the default headroom reaches zero. */
export const SATURATED_DELAY_MS = 100

/**
 * The headroom of `free` slots when the histogram's mean interval is `meanIntervalMs` (NaN: no
 * sample yet). Whole up to IDLE_DELAY_MS of delay, then falling in proportion to 0 at SATURATED_DELAY_MS.
 */
export const headroomOf = (free: number, meanIntervalMs: number): number => {
  const delayMs = Number.isNaN(meanIntervalMs) ? 0 : meanIntervalMs - EVENT_LOOP_SAMPLE_MS
  if (delayMs <= IDLE_DELAY_MS) return free
  return Math.floor(free * Math.max(0, 1 - (delayMs - IDLE_DELAY_MS) / (SATURATED_DELAY_MS - IDLE_DELAY_MS)))
}

/**
 * Samples the event loop while the scope is open; each reading is the headroom since the last
 * one: `maxActivations` less the live activations, reduced by the loop's delay over that time.
 */
export const makeDefaultHeadroom = (maxActivations: number, liveActivations: () => number): Effect.Effect<() => number, never, Scope.Scope> =>
  Effect.gen(function* () {
    const histogram = monitorEventLoopDelay({ resolution: EVENT_LOOP_SAMPLE_MS })
    histogram.enable()
    yield* Effect.addFinalizer(() => Effect.sync(() => histogram.disable()))
    return () => {
      const meanIntervalMs = histogram.mean / 1e6
      histogram.reset()
      return headroomOf(Math.max(0, maxActivations - liveActivations()), meanIntervalMs)
    }
  })
