// The public keys Pinboard signs attestations with (docs/worker.md "Attestation keys"), as
// `GET /registry/keys` last gave them. Fetched before the first registration, read again every
// 5 minutes (so that a set that became non-empty turns HS256 off), and fetched again when an
// attestation names a `kid` not in the set, at most once per 30 s: Pinboard publishes a key
// before it signs with it, so a worker that has not seen it yet catches up on the first token,
// and a flood of tokens naming made-up kids costs one fetch per 30 s.
//
// A worker holding the deployment token fetches the set before its first registration (and
// verifies HS256 with the token-derived key while the set is empty). One holding only a worker
// credential has no such key: it fetches the set at start, and does not start when it is empty.
import { Duration, Effect, Schedule, type Scope } from "effect"
import { createLocalJWKSet, type JWTVerifyGetKey } from "jose"
import { WorkerCredentialError } from "./Credential.js"
import { logCallError, REGISTRY_RETRY, registryCall } from "./RegistryCall.js"
import type { PublishedKey } from "./RegistryClient.js"

export const KEYS_REFRESH_MS = 5 * 60_000
export const UNKNOWN_KID_COOLDOWN_MS = 30_000

export interface KnownKeys {
  readonly kids: ReadonlySet<string>
  /** jose's key lookup over the set, for `jwtVerify`. */
  readonly verificationKeys: JWTVerifyGetKey
}

export interface AttestationKeySet {
  /** The set as last fetched; undefined until a fetch got through. */
  readonly current: () => KnownKeys | undefined
  /** Fetches the set now; rejects when Pinboard did not give it (the set in use stays). */
  readonly refresh: () => Promise<KnownKeys>
  /** The set, fetched first when it is not known yet. */
  readonly known: () => Promise<KnownKeys>
  /** The set once `kid` was looked for: fetched again when `kid` is not in it and the last fetch began 30 s ago or more. */
  readonly lookup: (kid: string) => Promise<KnownKeys | undefined>
}

const knownKeys = (keys: ReadonlyArray<PublishedKey>): KnownKeys => ({
  kids: new Set(keys.map((key) => key.kid)),
  verificationKeys: createLocalJWKSet({ keys: keys.map((key) => ({ ...key })) })
})

/**
 * `fetchKeys` is the registry call; `now` the worker's clock; `log` is told when a lookup's
 * fetch failed (the token is then refused).
 */
export const makeAttestationKeySet = (
  fetchKeys: () => Promise<ReadonlyArray<PublishedKey>>,
  now: () => number,
  log: (message: string, error?: unknown) => void
): AttestationKeySet => {
  let keys: KnownKeys | undefined
  let lastFetchAt = Number.NEGATIVE_INFINITY
  let inFlight: Promise<KnownKeys> | undefined

  // One fetch at a time: every caller that asks meanwhile shares it.
  const refresh = () =>
    (inFlight ??= (async () => {
      lastFetchAt = now()
      try {
        keys = knownKeys(await fetchKeys())
        return keys
      } finally {
        inFlight = undefined
      }
    })())

  const lookup = async (kid: string): Promise<KnownKeys | undefined> => {
    if (keys?.kids.has(kid) === true) return keys
    if (inFlight === undefined && now() - lastFetchAt < UNKNOWN_KID_COOLDOWN_MS) return keys
    return refresh().catch((error: unknown) => {
      log(`attestation keys fetch for kid ${kid} failed`, error)
      return keys
    })
  }

  return { current: () => keys, refresh, known: () => (keys === undefined ? refresh() : Promise.resolve(keys)), lookup }
}

const NO_ATTESTATION_KEYS =
  "Pinboard publishes no attestation keys (GET /registry/keys), so a worker holding a credential and no deployment token " +
  "could verify no Pinboard-Attestation: configure attestation keys on Pinboard (PINBOARD_ATTESTATION_KEYS, docs/deploy.md#credentials)"

const KEYS_FETCH = "attestation keys fetch"

/**
 * The key set, read again every KEYS_REFRESH_MS while the scope is open (a failed read is logged
 * and the set in use kept). `tokenHeld` false: fetched first, retried until Pinboard answers, and
 * a WorkerCredentialError when it is empty.
 */
export const keepAttestationKeys = (
  fetchKeys: () => Promise<ReadonlyArray<PublishedKey>>,
  tokenHeld: boolean,
  now: () => number,
  log: (message: string, error?: unknown) => void
): Effect.Effect<AttestationKeySet, WorkerCredentialError, Scope.Scope> =>
  Effect.gen(function* () {
    const keySet = makeAttestationKeySet(fetchKeys, now, log)
    const fetched = registryCall(KEYS_FETCH, keySet.refresh)
    if (!tokenHeld) {
      const keys = yield* fetched.pipe(
        Effect.tapError((error) => logCallError(KEYS_FETCH, error, ", retrying")),
        Effect.retry(REGISTRY_RETRY),
        Effect.orDie
      )
      if (keys.kids.size === 0) return yield* Effect.fail(new WorkerCredentialError({ message: NO_ATTESTATION_KEYS }))
    }
    const refreshed = fetched.pipe(
      Effect.flatMap((keys) =>
        keys.kids.size === 0 && !tokenHeld
          ? Effect.logError("Pinboard publishes no attestation keys any more: every request is refused until it does again")
          : Effect.void
      ),
      Effect.catch((error) => logCallError(KEYS_FETCH, error))
    )
    yield* Effect.forkScoped(Effect.schedule(refreshed, Schedule.spaced(Duration.millis(KEYS_REFRESH_MS))))
    return keySet
  })
