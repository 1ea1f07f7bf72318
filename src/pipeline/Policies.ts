// The request path's retry policy (docs/proxy.md "Retries") as a value, applied with
// `Effect.retry` in Deliver.ts. The fixed limits are named where they apply: a forward's in
// proxy/Limits.ts, a Redis call's in registry/RedisConnection.ts, the instance call depth in
// steps/Depth.ts. What `Effect.retry` costs per request: docs/proxy.md "What a request costs".
import { Schedule } from "effect"

/** More than this between resolve and send: the placement is resolved again. */
export const RE_RESOLVE_AFTER_MS = 5_000

/** An attempt's failure as the policy sees it: why it did not deliver. */
interface AttemptFailure {
  readonly why: { readonly _tag: string }
}

/**
 * A stale send is resolved again, once with the stale check; after that Deliver.ts sends the
 * next resolve however late: two re-resolves at most. Nothing else is retried here.
 */
export const RE_RESOLVE: Schedule.Schedule<number, AttemptFailure> = Schedule.recurs(1).pipe(
  Schedule.while<AttemptFailure, number>(({ input }) => input.why._tag === "StaleResolve")
)
