// Wind-down (docs/worker.md "Lifecycle of an activation"): Pinboard wants a
// placement back by a deadline. The definition's hook gets until a margin short of it, counted
// on the Clock so that a TestClock drives the budget; then the activation is deactivated and
// its placement released, so that the new owner need not wait for the deadline.
import { Clock, Duration, Effect } from "effect"
import type { Activation, Activations } from "./Activations.js"
import type { WindDownEntry } from "./RegistryClient.js"

/** Time a wind-down hook may take, kept short of Pinboard's deadline. */
export const WIND_DOWN_MARGIN_MS = 1_000

type Log = (message: string, error?: unknown) => void

/** The definition's hook on the activation's state, for at most `budget`; a failure is logged. */
const runHook = (activation: Activation, deadline: number, budget: Duration.Duration, log: Log): Effect.Effect<void> => {
  const hook = activation.definition.windDown
  if (hook === undefined) return Effect.void
  const failed = (error: unknown) => log(`wind-down hook of ${activation.key} failed`, error)
  return Effect.gen(function* () {
    const state = yield* Effect.tryPromise(() => activation.ready)
    const done = yield* Effect.try(() => Promise.resolve(hook(state, new Date(deadline), activation.context)))
    // The hook keeps running past its budget (a Promise cannot be stopped); a failure there is still reported.
    done.catch(failed)
    yield* Effect.tryPromise(() => done).pipe(Effect.timeout(budget), Effect.ignore)
  }).pipe(Effect.catch((error) => Effect.sync(() => failed(error.cause))))
}

/** Winds down the activations `entries` name, side by side, each within its own budget. */
export const windDown = (activations: Activations, entries: ReadonlyArray<WindDownEntry>, log: Log): Effect.Effect<void> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    yield* Effect.forEach(
      activations.startWindDown(entries),
      ({ activation, deadline }) =>
        Effect.andThen(
          runHook(activation, deadline, Duration.millis(Math.max(0, deadline - now - WIND_DOWN_MARGIN_MS)), log),
          Effect.promise(() => activations.endWindDown(activation))
        ),
      { concurrency: "unbounded", discard: true }
    )
  })
