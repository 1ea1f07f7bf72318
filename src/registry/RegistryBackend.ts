// What the two registry backends (Memory.ts, Redis.ts) implement: the per-bucket operations of the
// reference model with `now` passed in, and the all-bucket operations fanned out at once.
// RegistryOnBackend.ts puts Clock, Random, bucket hashing and the API's answers around it.
//
// A fan-out reports bucket by bucket: on a Redis Cluster one shard can be down while the
// others answer, and the buckets that answered must still count (docs/registry-api.md "Partial
// answers on a Redis Cluster").
import { Effect } from "effect"
import type {
  BucketHeartbeat,
  CallerPlacement,
  CasOutcome,
  OwnerGrant,
  PlacementKey,
  PlacementView,
  RegisterOutcome,
  ResolveOutcome,
  ResolveQuery,
  WindDownOutcome,
  WorkerHeartbeat,
  WorkerRegistration,
  WorkerView
} from "./Domain.js"
import { RegistryUnavailable } from "../Errors.js"

type BucketOp<A> = Effect.Effect<A, RegistryUnavailable>

/** An all-bucket operation's outcome: the answers of the buckets reached, and the rest. */
export interface FanOut<A> {
  /** Bucket number and answer, in bucket order. */
  readonly reached: ReadonlyArray<readonly [number, A]>
  readonly unreached: ReadonlyArray<number>
  /** Why the first unreached bucket was not reached. */
  readonly failure?: RegistryUnavailable
}

type Every<A> = Effect.Effect<FanOut<A>>

/** A fan-out that reached no bucket at all is the registry being unavailable. */
export const reachedAny = <A>(out: FanOut<A>): Effect.Effect<FanOut<A>, RegistryUnavailable> =>
  out.reached.length > 0 ? Effect.succeed(out) : Effect.fail(out.failure ?? new RegistryUnavailable({}))

/** A fan-out that must reach every bucket (a retry finishes the job: these calls are idempotent). */
export const reachedAll = <A>(out: FanOut<A>): Effect.Effect<void, RegistryUnavailable> =>
  out.unreached.length === 0 ? Effect.void : Effect.fail(out.failure ?? new RegistryUnavailable({}))

export interface RegistryBackend {
  readonly buckets: number
  /** Why the backend is failing now (docs/operations.md "Logs"), if it is: for /readyz. */
  readonly failing: () => string | undefined
  // every bucket, one round trip per shard
  /** Every bucket, or only `buckets` (in bucket order) when given. */
  readonly register: (now: number, registration: WorkerRegistration, buckets?: ReadonlyArray<number>) => Every<RegisterOutcome>
  readonly heartbeat: (now: number, beat: WorkerHeartbeat) => Every<BucketHeartbeat>
  readonly deregister: (now: number, worker: string, incarnation: string) => Every<void>
  readonly nack: (now: number, worker: string) => Every<void>
  readonly sweep: (now: number) => Every<void>
  // one bucket, one atomic operation
  readonly resolve: (bucket: number, now: number, query: ResolveQuery) => BucketOp<ResolveOutcome>
  /** With `owners`, the owner check and the compare-and-set are one atomic step. */
  readonly release: (bucket: number, now: number, key: PlacementKey, epoch: string, owners?: OwnerGrant) => BucketOp<CasOutcome>
  readonly tag: (bucket: number, now: number, key: PlacementKey, epoch: string, tag: string, owners?: OwnerGrant) => BucketOp<CasOutcome>
  readonly beginWindDown: (bucket: number, now: number, key: PlacementKey, epoch: string) => BucketOp<WindDownOutcome>
  // reads
  readonly placement: (bucket: number, now: number, key: PlacementKey) => BucketOp<PlacementView | undefined>
  /** The row as `placement` reads it, and `worker`'s incarnation and caller key in the same bucket, in one call. */
  readonly callerPlacement: (bucket: number, now: number, key: PlacementKey, worker: string) => BucketOp<CallerPlacement>
  /**
   * Every bucket holds the whole membership: read from the first bucket that answers, at most
   * `limit` workers after the worker id `after` ("" from the first), in worker id order.
   */
  readonly workers: (now: number, after: string, limit: number) => BucketOp<ReadonlyArray<WorkerView>>
  /** Every bucket: how many placement rows name each of `workers` there (for the fleet page). */
  readonly placementsHeld: (now: number, workers: ReadonlyArray<string>) => Every<ReadonlyArray<number>>
  /** The registry's own time in ms (Redis `TIME`, to the µs): what RegistryClock.ts samples. */
  readonly time: BucketOp<number>
}
