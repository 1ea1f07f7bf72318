// How the steps are chained: `Effect.flatMap`, except that a step that decided at once (it
// returned an Exit, such as `Effect.succeed`, or an Either) is continued at once, without a
// turn of the fiber's run loop. Most requests pass most steps that way (no credential to
// check, no caller token, the inflight cap not reached).
import { Effect, Either, Exit } from "effect"

export const afterStep = <A, E, R, B, E2, R2>(
  step: Effect.Effect<A, E, R>,
  then: (a: A) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E | E2, R | R2> => {
  // An Exit or Either that is an Effect<A, E> holds an A or an E.
  if (Exit.isExit(step)) return Exit.isSuccess(step) ? then(step.value as A) : (step as Exit.Exit<never, E>)
  if (Either.isEither(step)) return Either.isRight(step) ? then(step.right as A) : Effect.fail(step.left as E)
  return Effect.flatMap(step, then)
}
