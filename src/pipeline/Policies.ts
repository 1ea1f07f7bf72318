// The request path's retries as values (docs/proxy.md
// "Retries"): two Schedules, applied with `Effect.retry`'s semantics in Deliver.ts.
// The fixed limits are named where they apply: a forward's in proxy/Limits.ts, a Redis
// call's in registry/RedisConnection.ts, the instance call depth in steps/Depth.ts.
//
// What the declared form costs per request is measured by `npm run bench:effect`
// (bench/effectCosts.ts): see docs/proxy.md "What a request costs".
import { Duration, Effect, Schedule } from "effect"

/** More than this between resolve and send: the placement is resolved again. */
export const RE_RESOLVE_AFTER_MS = 5_000

/** The errors the policies look at: their tag. */
type Tagged = { readonly _tag: string }

/**
 * A stale send is resolved again, once with the stale check; after that Deliver.ts sends the
 * next resolve however late: two re-resolves at most.
 */
export const RE_RESOLVE: Schedule.Schedule<number, Tagged> = Schedule.recurs(1).pipe(
  Schedule.while<Tagged, number>(({ input }) => input._tag === "StaleResolve")
)

/** After an in-band refusal, one re-place on another worker (requests without a body and upgrades only). */
export const REFUSAL_RE_PLACE: Schedule.Schedule<void, Tagged> = Schedule.once.pipe(
  Schedule.while<Tagged, void>(({ input }) => input._tag === "RefusedBy")
)

/**
 * `Effect.retry(self, policy)`, with the policy's step function made only once `self` has
 * failed: the same retries, but a request that succeeds at once pays one catch instead of a
 * schedule driver (both policies: +1.3 µs a request instead of +17 to +29 µs; `npm run
 * bench:effect`, docs/proxy.md). The retries run `again()` (by default `self` itself),
 * made only when a retry is due; a zero delay (both policies) retries at once, without a sleep.
 */
export const retryAfterFailure = <A, E, R, Out>(
  self: Effect.Effect<A, E, R>,
  policy: Schedule.Schedule<Out, E>,
  again: () => Effect.Effect<A, E, R> = () => self
): Effect.Effect<A, E, R> =>
  Effect.catch(self, (first) =>
    Effect.flatMap(Schedule.toStep(policy), (step) =>
      Effect.clockWith((clock) => {
        const next = (error: E): Effect.Effect<A, E, R> =>
          Effect.matchEffect(step(clock.currentTimeMillisUnsafe(), error), {
            onFailure: () => Effect.fail(error),
            onSuccess: ([, delay]) =>
              Duration.isZero(delay) ? Effect.catch(again(), next) : Effect.andThen(Effect.sleep(delay), Effect.catch(again(), next))
          })
        return next(first)
      })
    )
  )
