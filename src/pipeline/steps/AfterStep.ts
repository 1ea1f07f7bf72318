// How the steps are chained: `Effect.flatMap`, except that a step that decided at once (it
// returned an Exit, such as `Effect.succeed`, or a Result) is continued at once, without a
// turn of the fiber's run loop. Most requests pass most steps that way (no credential to
// check, no caller token, the inflight cap not reached).
import { Effect, Exit, Result } from "effect"

export const afterStep = <A, E, R, B, E2, R2>(
  step: Effect.Effect<A, E, R> | Result.Result<A, E>,
  then: (a: A) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E | E2, R | R2> => {
  // An Exit that is an Effect<A, E> holds an A or an E; so does a Result (not an Effect in Effect 4).
  if (Exit.isExit(step)) return Exit.isSuccess(step) ? then(step.value as A) : (step as Exit.Exit<never, E>)
  if (Result.isResult(step)) return Result.isSuccess(step) ? then(step.success) : Effect.fail(step.failure)
  return Effect.flatMap(step, then)
}
