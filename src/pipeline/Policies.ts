// The request path's policies as values (routing.md "Retries Pinboard makes"; the seed's
// "In-band refusal" and "Limits"; DESIGN 2 and 9): the two retries as Schedules, applied
// with `Effect.retry` in Deliver.ts, and the fixed limits, which run on Clock (Deadlines.ts)
// so that a TestClock drives them. None of these is an option; tests reach them through
// the Clock, never through configuration.
//
// What the declared form costs per request is measured by `npm run bench:effect`
// (bench/effectCosts.ts): see docs/proxy.md "What a request costs".
import { Effect, Schedule } from "effect"

/** More than this between resolve and send: the placement is resolved again. */
export const RE_RESOLVE_AFTER_MS = 5_000
export const MAX_RE_RESOLVES = 2

/** A stale send is resolved again, at most MAX_RE_RESOLVES times; the last resolve is sent however late. */
export const RE_RESOLVE = Schedule.recurs(MAX_RE_RESOLVES).pipe(
  Schedule.whileInput((error: { readonly _tag: string }) => error._tag === "StaleResolve")
)

/** After an in-band refusal, one re-place on another worker (requests without a body and upgrades only). */
export const REFUSAL_RE_PLACE = Schedule.once.pipe(Schedule.whileInput((error: { readonly _tag: string }) => error._tag === "RefusedBy"))

/** TCP connect to a worker. */
export const CONNECT_TIMEOUT_MS = 5_000
/** No data from the worker on a streamed response body for this long ends the exchange. */
export const BODY_IDLE_MS = 60_000
/**
 * Upper bound on one Redis call: Redis slow or unreachable is a 503, never a hang. Enforced
 * by the Redis client itself (`commandTimeout`, no offline queue), in real time: it bounds a
 * socket's wait, which only a real Redis has.
 */
export const REGISTRY_CALL_TIMEOUT_MS = 1_000
/** Dead-peer detection on both sockets of a WebSocket tunnel. */
export const TUNNEL_KEEPALIVE_MS = 30_000
/** Instance call depth (DESIGN 7). */
export const MAX_DEPTH = 50

/** The limits of one forward; `headersMs` is `forwards.timeoutMs`. */
export interface ForwardLimits {
  readonly connectMs: number
  readonly headersMs: number
  readonly bodyIdleMs: number
}

export const forwardLimits = (headersTimeoutMs: number): ForwardLimits => ({
  connectMs: CONNECT_TIMEOUT_MS,
  headersMs: headersTimeoutMs,
  bodyIdleMs: BODY_IDLE_MS
})

/**
 * `Effect.retry(self, policy)`, with the policy's driver made only once `self` has failed:
 * the same retries, but a request that succeeds at once pays one catch instead of a
 * schedule driver (both policies: +1.3 µs a request instead of +17 to +29 µs; `npm run
 * bench:effect`, docs/proxy.md). The retries run `again()` (by default `self` itself),
 * made only when a retry is due.
 */
export const retryAfterFailure = <A, E, R, Out>(
  self: Effect.Effect<A, E, R>,
  policy: Schedule.Schedule<Out, E>,
  again: () => Effect.Effect<A, E, R> = () => self
): Effect.Effect<A, E, R> =>
  Effect.catchAll(self, (first) =>
    Effect.flatMap(Schedule.driver(policy), (driver) => {
      const next = (error: E): Effect.Effect<A, E, R> =>
        Effect.matchEffect(driver.next(error), {
          onFailure: () => Effect.fail(error),
          onSuccess: () => Effect.catchAll(again(), next)
        })
      return next(first)
    })
  )
