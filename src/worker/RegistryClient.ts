// The registry API as a worker calls it (docs/registry-api.md): register,
// heartbeat, release, deregister. Promise-based, since a worker's author may give their own;
// the lease keeper adds the schedules. Answers are decoded with Schema: one that does not fit
// fails the call, which is retried.
import { Data, Effect, Result, Schema } from "effect"

export interface Registration {
  readonly incarnation: string
  readonly leaseMs: number
  readonly heartbeatMs: number
  /** Pinboard's bucket count; absent from older Pinboards (then the lease is one for all ids). */
  readonly buckets?: number
  /** Buckets this call did not reach (a Redis Cluster shard is down): no lease there. */
  readonly unrenewed: ReadonlyArray<number>
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
}

/** A registry call that got no answer, or one that is not what docs/registry-api.md gives. */
export class RegistryCallFailed extends Data.TaggedError("RegistryCallFailed")<{ readonly message: string }> {}

/** An absent list of buckets decodes as none. */
const NoBuckets = Schema.Array(Schema.Int).pipe(Schema.withDecodingDefaultType(Effect.succeed([])))

// The answers as docs/registry-api.md gives them; fields Pinboard may add later are ignored.
const WorkerRegistered = Schema.Struct({
  incarnation: Schema.String,
  leaseMs: Schema.Number,
  heartbeatMs: Schema.Number,
  /** Absent from older Pinboards (then the lease is one for all ids). */
  buckets: Schema.optional(Schema.Int.check(Schema.isGreaterThan(0))),
  unrenewed: NoBuckets
})

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

export interface HttpRegistryOptions {
  /** Pinboard's base URL, e.g. `http://pinboard:8080`. */
  readonly pinboard: string
  readonly token: string
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
  const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> => {
    let response: Response
    try {
      response = await fetch(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${options.token}`, "content-type": "application/json" },
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
  const unexpected = (what: string, answer: { status: number; json: unknown }) =>
    new RegistryCallFailed({ message: `${what}: ${answer.status} ${JSON.stringify(answer.json)}` })
  const workerPath = `/registry/workers/${encodeURIComponent(options.worker)}`

  return {
    register: async (status) => {
      const answer = await call("POST", "/registry/workers", {
        worker: options.worker,
        advertiseUrl: options.advertiseUrl,
        namespaces: registeredNamespaces(options.namespaces, options.hostnames),
        headroom: status.headroom,
        draining: status.draining,
        ...(options.registrationEpoch === undefined ? {} : { epoch: options.registrationEpoch })
      })
      if (answer.status !== 200) throw unexpected("register", answer)
      const { incarnation, leaseMs, heartbeatMs, buckets, unrenewed } = decodeAnswer(WorkerRegistered, "register", answer.json)
      return { incarnation, leaseMs, heartbeatMs, ...(buckets === undefined ? {} : { buckets }), unrenewed }
    },
    heartbeat: async (incarnation, status) => {
      const answer = await call("POST", `${workerPath}/heartbeat`, { incarnation, headroom: status.headroom, draining: status.draining })
      if (answer.status === 410) return { _tag: "LeaseLost" }
      if (answer.status !== 200) throw unexpected("heartbeat", answer)
      const { windDown, unrenewed } = decodeAnswer(HeartbeatRenewed, "heartbeat", answer.json)
      return { _tag: "Renewed", windDown, unrenewed }
    },
    release: async ({ env, namespace, id }, epoch) => {
      const answer = await call("POST", "/registry/release", { namespace, id, epoch, ...(env === "" ? {} : { env }) })
      if (answer.status === 200) return true
      if (answer.status === 409) return false
      throw unexpected("release", answer)
    },
    deregister: async (incarnation) => {
      const answer = await call("DELETE", `${workerPath}?incarnation=${encodeURIComponent(incarnation)}`)
      if (answer.status !== 204) throw unexpected("deregister", answer)
    }
  }
}
