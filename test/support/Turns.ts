// Waiting in in-process tests on TestClock without sleeping: after a clock step, the fibers it
// woke (and the fakes they call) go on in promise jobs and event-loop turns. A test polls the
// condition it expects turn by turn (`until`), or, to check that nothing happened, yields a
// few turns (`flush`) so that whatever the step woke has run to its next wait.
import { Effect } from "effect"
import { scaled } from "./Time.js"

const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * Turns `flush` yields. Every promise job queued runs before the next turn, and Effect runs
 * fibers in promise jobs, so what a clock step woke (fakes answering in promises included)
 * reaches its next wait in the first turn; the others are for a callback that one turn queues
 * for the next (a server's 'close', a socket's ready I/O).
 */
const FLUSH_TURNS = 5

/** Yields the event loop a few turns: for checks that a clock step did NOT make something happen. */
export const flush: Effect.Effect<void> = Effect.promise(async () => {
  for (let i = 0; i < FLUSH_TURNS; i++) await turn()
})

/**
 * Yields event-loop turns until `condition` holds; dies naming `reason` after `timeoutMs` of
 * real time (nominal, scaled by PINBOARD_TEST_TIME_SCALE).
 */
export const until = (condition: (() => boolean) | Effect.Effect<boolean>, reason: string, timeoutMs = 5000): Effect.Effect<void> =>
  Effect.suspend(() => {
    const deadline = performance.now() + scaled(timeoutMs)
    const holds = typeof condition === "function" ? Effect.sync(condition) : condition
    const look: Effect.Effect<void> = Effect.flatMap(holds, (ok) => {
      if (ok) return Effect.void
      if (performance.now() > deadline) return Effect.die(new Error(`timed out after ${scaled(timeoutMs)} ms waiting for ${reason}`))
      return Effect.andThen(Effect.promise(turn), Effect.suspend(() => look))
    })
    return look
  })
