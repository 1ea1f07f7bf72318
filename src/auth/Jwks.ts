// A remote JWKS for a jwt provider (docs/config.md "Providers"): fetched on first use with a time limit,
// kept for JWKS_MAX_AGE_MS, refetched on an unknown `kid` at most once per
// JWKS_REFETCH_COOLDOWN_MS. An outage fails closed: no keys, no accepted token. Times come
// from Clock, so TestClock drives the cache; jose picks the key from the document.
import { Clock, Data, Duration, Effect, Semaphore } from "effect"
import { createLocalJWKSet, errors, type JSONWebKeySet, type JWSHeaderParameters } from "jose"

export const JWKS_FETCH_TIMEOUT = Duration.seconds(3)
export const JWKS_MAX_AGE_MS = 10 * 60_000
/** As jose's remote JWKS: an unknown `kid` refetches at most this often. */
export const JWKS_REFETCH_COOLDOWN_MS = 30_000
/** After a failed fetch, requests fail at once for this long instead of queueing behind another. */
export const JWKS_RETRY_AFTER_FAILURE_MS = 1_000

type KeySelector = ReturnType<typeof createLocalJWKSet>
export type VerificationKey = Awaited<ReturnType<KeySelector>>

/** No key set to be had: the fetch failed, timed out or was not a key set (`message` says which). */
export class JwksUnavailable extends Data.TaggedError("JwksUnavailable")<{ readonly message: string }> {}

interface Fetched {
  readonly select: KeySelector
  readonly fetchedAt: number
}

/** GETs the document; the fetch is the seam tests may replace. */
export type FetchJwks = (url: string, signal: AbortSignal) => Promise<unknown>

export const fetchJwksOverHttp: FetchJwks = async (url, signal) => {
  const response = await fetch(url, { signal, redirect: "error", headers: { accept: "application/json" } })
  if (!response.ok) throw new JwksUnavailable({ message: `JWKS ${url} answered ${response.status}` })
  return response.json()
}

const isKeySet = (document: unknown): document is JSONWebKeySet =>
  typeof document === "object" && document !== null && Array.isArray((document as { keys?: unknown }).keys)

export interface RemoteJwks {
  /** The key for a token's protected header; fails when none can be had. */
  readonly keyFor: (header: JWSHeaderParameters) => Effect.Effect<VerificationKey, JwksUnavailable>
}

export const makeRemoteJwks = (url: string, fetchJwks: FetchJwks = fetchJwksOverHttp): Effect.Effect<RemoteJwks> =>
  Effect.map(Semaphore.make(1), (lock) => {
    let fetched: Fetched | undefined
    /** Fetch attempts finished; a caller that queued behind one takes its outcome. */
    let attemptsDone = 0
    let lastAttemptAt = -Infinity
    let lastAttemptFailed = false

    const download = Effect.tryPromise({
      try: (signal) => fetchJwks(url, signal),
      catch: (cause) => (cause instanceof JwksUnavailable ? cause : new JwksUnavailable({ message: `JWKS ${url}: ${String(cause)}` }))
    }).pipe(
      Effect.timeoutOrElse({
        duration: JWKS_FETCH_TIMEOUT,
        orElse: () => Effect.fail(new JwksUnavailable({ message: `JWKS ${url}: no answer in time` }))
      }),
      Effect.flatMap((document) =>
        isKeySet(document)
          ? Effect.try({ try: () => createLocalJWKSet(document), catch: () => new JwksUnavailable({ message: `JWKS ${url}: not a key set` }) })
          : Effect.fail(new JwksUnavailable({ message: `JWKS ${url}: not a key set` }))
      )
    )

    // One fetch at a time; callers that queued behind an attempt take its outcome.
    const refresh = (): Effect.Effect<Fetched, JwksUnavailable> => {
      const seen = attemptsDone
      return lock.withPermits(1)(
        Effect.suspend(() => {
          if (attemptsDone !== seen) {
            return fetched !== undefined && !lastAttemptFailed ? Effect.succeed(fetched) : Effect.fail(new JwksUnavailable({ message: `JWKS ${url}: unavailable` }))
          }
          return Effect.flatMap(Clock.currentTimeMillis, (now) => {
            lastAttemptAt = now
            return download.pipe(
              Effect.map((select) => (fetched = { select, fetchedAt: now })),
              Effect.tap(() => Effect.sync(() => (lastAttemptFailed = false))),
              Effect.tapError((error) => Effect.andThen(Effect.sync(() => (lastAttemptFailed = true)), Effect.logWarning(error.message))),
              Effect.ensuring(Effect.sync(() => attemptsDone++))
            )
          })
        })
      )
    }

    const current = (now: number): Effect.Effect<Fetched, JwksUnavailable> => {
      if (fetched !== undefined && now - fetched.fetchedAt < JWKS_MAX_AGE_MS) return Effect.succeed(fetched)
      if (lastAttemptFailed && now - lastAttemptAt < JWKS_RETRY_AFTER_FAILURE_MS) {
        return Effect.fail(new JwksUnavailable({ message: `JWKS ${url}: unavailable` }))
      }
      return refresh()
    }

    const select = (keys: Fetched, header: JWSHeaderParameters) =>
      Effect.tryPromise({ try: () => keys.select(header), catch: (cause) => cause })

    return {
      keyFor: (header) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.flatMap(current(now), (keys) =>
            select(keys, header).pipe(
              Effect.catch((cause) => {
                const unknownKid = cause instanceof errors.JWKSNoMatchingKey
                if (unknownKid && now - keys.fetchedAt >= JWKS_REFETCH_COOLDOWN_MS && now - lastAttemptAt >= JWKS_REFETCH_COOLDOWN_MS) {
                  return Effect.flatMap(refresh(), (fresh) => select(fresh, header))
                }
                return Effect.fail(cause)
              }),
              Effect.mapError((cause) => (cause instanceof JwksUnavailable ? cause : new JwksUnavailable({ message: `JWKS ${url}: no key for the token (${String(cause)})` })))
            )
          )
        )
    }
  })
