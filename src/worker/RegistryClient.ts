// The registry API as a worker calls it (docs/registry-api.md): register,
// heartbeat, release, deregister, and the keys attestations are signed with. Promise-based,
// since a worker's author may give their own; the lease keeper adds the schedules. Every call
// presents the worker's credential (Credential.ts). Answers are decoded with Schema: one that
// does not fit fails the call, which is retried.
import { Data, Effect, Result, Schema } from "effect"
import { presentedCredential, type CredentialOptions } from "./Credential.js"

export interface Registration {
  readonly incarnation: string
  readonly leaseMs: number
  readonly heartbeatMs: number
  /** Pinboard's bucket count; absent from older Pinboards (then the lease is one for all ids). */
  readonly buckets?: number
  /** Buckets this call did not reach (a Redis Cluster shard is down): no lease there. */
  readonly unrenewed: ReadonlyArray<number>
  /**
   * With Pinboard's attestation keys: this incarnation's key for `Pinboard-Caller` (32 bytes,
   * base64url). Absent: caller tokens are signed with the key derived from the deployment token.
   */
  readonly callerKey?: string
}

/** Which placement: `env` is `""` outside hostname-aware mode. */
export interface PlacementRef {
  readonly env: string
  readonly namespace: string
  readonly id: string
}

export const placementOf = ({ env, namespace, id }: PlacementRef): PlacementRef => ({ env, namespace, id })

export interface WindDownEntry extends PlacementRef {
  readonly epoch: string
  /** Pinboard's clock, ms since the epoch. */
  readonly deadline: number
}

export type HeartbeatAnswer =
  | { readonly _tag: "Renewed"; readonly windDown: ReadonlyArray<WindDownEntry>; readonly unrenewed: ReadonlyArray<number> }
  | { readonly _tag: "LeaseLost" }

export interface WorkerStatus {
  readonly headroom: number
  readonly draining: boolean
}

/** What a worker needs from the registry; tests may give their own. */
export interface RegistryClient {
  readonly register: (status: WorkerStatus) => Promise<Registration>
  readonly heartbeat: (incarnation: string, status: WorkerStatus) => Promise<HeartbeatAnswer>
  /** True when released, false when the placement had already moved on. */
  readonly release: (placement: PlacementRef, epoch: string) => Promise<boolean>
  readonly deregister: (incarnation: string) => Promise<void>
  /**
   * The public keys Pinboard signs attestations with (`GET /registry/keys`); none: HS256 with the
   * key derived from the deployment token. A client without it stands for a Pinboard without keys.
   */
  readonly keys?: () => Promise<ReadonlyArray<PublishedKey>>
}

/** A registry call that got no answer, or one that is not what docs/registry-api.md gives. */
export class RegistryCallFailed extends Data.TaggedError("RegistryCallFailed")<{ readonly message: string }> {}

/** Pinboard refused the call (401, 403): the credential does not allow it; `error` is Pinboard's text. */
export class RegistryCallRefused extends Data.TaggedError("RegistryCallRefused")<{
  readonly message: string
  readonly status: number
  readonly error: string
}> {}

/** An absent list of buckets decodes as none. */
const NoBuckets = Schema.Array(Schema.Int).pipe(Schema.withDecodingDefaultType(Effect.succeed([])))

// The answers as docs/registry-api.md gives them; fields Pinboard may add later are ignored.
const WorkerRegistered = Schema.Struct({
  incarnation: Schema.String,
  leaseMs: Schema.Number,
  heartbeatMs: Schema.Number,
  /** Absent from older Pinboards (then the lease is one for all ids). */
  buckets: Schema.optional(Schema.Int.check(Schema.isGreaterThan(0))),
  unrenewed: NoBuckets,
  /** 32 bytes, base64url without padding. */
  callerKey: Schema.optional(Schema.String.check(Schema.isPattern(/^[A-Za-z0-9_-]{43}$/)))
})

/** A key as `GET /registry/keys` publishes it: an Ed25519 public JWK naming its `kid`. */
const PublishedKey = Schema.Struct({
  kty: Schema.String,
  kid: Schema.String,
  crv: Schema.optionalKey(Schema.String),
  x: Schema.optionalKey(Schema.String),
  alg: Schema.optionalKey(Schema.String),
  use: Schema.optionalKey(Schema.String)
})
export type PublishedKey = typeof PublishedKey.Type

const KeysAnswer = Schema.Struct({ keys: Schema.Array(PublishedKey) })

const WindDownAnswer = Schema.Struct({
  namespace: Schema.String,
  id: Schema.String,
  env: Schema.String.pipe(Schema.withDecodingDefaultType(Effect.succeed(""))),
  epoch: Schema.String,
  deadline: Schema.Number
})

const HeartbeatRenewed = Schema.Struct({
  windDown: Schema.Array(WindDownAnswer),
  unrenewed: NoBuckets
})

/** The answer's body as `schema` has it, or a RegistryCallFailed that says what did not fit. */
const decodeAnswer = <S extends Schema.ConstraintDecoder<unknown>>(schema: S, what: string, json: unknown): S["Type"] =>
  Result.getOrElse(Schema.decodeUnknownResult(schema)(json), (error) => {
    throw new RegistryCallFailed({ message: `${what}: unexpected answer: ${error.message}` })
  })

/** Each call gives up after this long; the lease keeper retries it, on the Clock. */
const CALL_TIMEOUT_MS = 2_000

/** The credential: exactly one of `token`, `credential` and `credentialFile`. */
export interface HttpRegistryOptions extends CredentialOptions {
  /** Pinboard's base URL, e.g. `http://pinboard:8080`. */
  readonly pinboard: string
  readonly worker: string
  readonly advertiseUrl: string
  readonly namespaces: ReadonlyArray<string>
  /** Hostname-aware mode: every namespace is registered for each of these hostnames, in its env. */
  readonly hostnames?: ReadonlyArray<HostnameEnv>
  /** The registration epoch that sets hostname bindings; default Pinboard's `"0"`. */
  readonly registrationEpoch?: string
}

/** A hostname this worker serves, and the env its placements belong to (docs/proxy.md "Hostname-aware mode"). */
export interface HostnameEnv {
  readonly hostname: string
  readonly env: string
}

/** The `namespaces` of a register body: strings, or one object per (namespace, hostname) in hostname-aware mode. */
const registeredNamespaces = (namespaces: ReadonlyArray<string>, hostnames: ReadonlyArray<HostnameEnv> | undefined) =>
  hostnames === undefined ? namespaces : namespaces.flatMap((namespace) => hostnames.map(({ hostname, env }) => ({ namespace, hostname, env })))

export const httpRegistryClient = (options: HttpRegistryOptions): RegistryClient => {
  const base = options.pinboard.replace(/\/+$/, "")
  const credential = presentedCredential(options)
  const call = async (what: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> => {
    let bearer: string
    try {
      bearer = await credential.current()
    } catch (error) {
      throw new RegistryCallFailed({ message: `${what}: ${error instanceof Error ? error.message : String(error)}` })
    }
    let response: Response
    try {
      response = await fetch(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        // Real time, not Clock: it bounds fetch's wait on a socket, which only a real Pinboard answers.
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS)
      })
    } catch (error) {
      throw new RegistryCallFailed({ message: `${method} ${path}: ${error instanceof Error ? error.message : String(error)}` })
    }
    const text = await response.text()
    try {
      return { status: response.status, json: text === "" ? undefined : (JSON.parse(text) as unknown) }
    } catch {
      throw new RegistryCallFailed({ message: `${method} ${path}: ${response.status} with a body that is not JSON` })
    }
  }
  const unexpected = (what: string, { status, json }: { status: number; json: unknown }) => {
    const error = (json as { error?: unknown } | undefined)?.error
    if ((status === 401 || status === 403) && typeof error === "string") return new RegistryCallRefused({ message: `${what}: ${status} ${error}`, status, error })
    return new RegistryCallFailed({ message: `${what}: ${status} ${JSON.stringify(json)}` })
  }
  const workerPath = `/registry/workers/${encodeURIComponent(options.worker)}`

  return {
    register: async (status) => {
      const answer = await call("register", "POST", "/registry/workers", {
        worker: options.worker,
        advertiseUrl: options.advertiseUrl,
        namespaces: registeredNamespaces(options.namespaces, options.hostnames),
        headroom: status.headroom,
        draining: status.draining,
        ...(options.registrationEpoch === undefined ? {} : { epoch: options.registrationEpoch })
      })
      if (answer.status !== 200) throw unexpected("register", answer)
      const { incarnation, leaseMs, heartbeatMs, buckets, unrenewed, callerKey } = decodeAnswer(WorkerRegistered, "register", answer.json)
      return { incarnation, leaseMs, heartbeatMs, ...(buckets === undefined ? {} : { buckets }), unrenewed, ...(callerKey === undefined ? {} : { callerKey }) }
    },
    heartbeat: async (incarnation, status) => {
      const answer = await call("heartbeat", "POST", `${workerPath}/heartbeat`, { incarnation, headroom: status.headroom, draining: status.draining })
      if (answer.status === 410) return { _tag: "LeaseLost" }
      if (answer.status !== 200) throw unexpected("heartbeat", answer)
      const { windDown, unrenewed } = decodeAnswer(HeartbeatRenewed, "heartbeat", answer.json)
      return { _tag: "Renewed", windDown, unrenewed }
    },
    release: async ({ env, namespace, id }, epoch) => {
      const answer = await call("release", "POST", "/registry/release", { namespace, id, epoch, ...(env === "" ? {} : { env }) })
      if (answer.status === 200) return true
      if (answer.status === 409) return false
      throw unexpected("release", answer)
    },
    deregister: async (incarnation) => {
      const answer = await call("deregister", "DELETE", `${workerPath}?incarnation=${encodeURIComponent(incarnation)}`)
      if (answer.status !== 204) throw unexpected("deregister", answer)
    },
    keys: async () => {
      const answer = await call("keys", "GET", "/registry/keys")
      // A Pinboard from before attestation keys has no such route: it signs HS256.
      if (answer.status === 404) return []
      if (answer.status !== 200) throw unexpected("keys", answer)
      return decodeAnswer(KeysAnswer, "keys", answer.json).keys
    }
  }
}
