// What the two registry layers (Memory, Redis) implement: the per-bucket operations of the
// reference model with `now` passed in, and the all-bucket operations fanned out at once.
// Registry.ts puts Clock, Random, bucket hashing and the API's answers around it.
import type { Effect } from "effect"
import type {
  BucketHeartbeat,
  CasOutcome,
  PlacementKey,
  PlacementView,
  ResolveOutcome,
  ResolveQuery,
  WindDownOutcome,
  WorkerHeartbeat,
  WorkerRegistration,
  WorkerView
} from "./Domain.js"
import type { RegistryUnavailable } from "../Errors.js"

type Op<A> = Effect.Effect<A, RegistryUnavailable>

export interface RegistryBackend {
  readonly buckets: number
  // every bucket, in one round trip
  readonly register: (now: number, registration: WorkerRegistration) => Op<void>
  readonly heartbeat: (now: number, beat: WorkerHeartbeat) => Op<ReadonlyArray<BucketHeartbeat>>
  readonly deregister: (now: number, worker: string, incarnation: string) => Op<void>
  readonly nack: (now: number, worker: string) => Op<void>
  readonly sweep: (now: number) => Op<void>
  // one bucket, one atomic operation
  readonly resolve: (bucket: number, now: number, query: ResolveQuery) => Op<ResolveOutcome>
  readonly release: (bucket: number, now: number, key: PlacementKey, epoch: string) => Op<CasOutcome>
  readonly tag: (bucket: number, now: number, key: PlacementKey, epoch: string, tag: string) => Op<CasOutcome>
  readonly beginWindDown: (bucket: number, now: number, key: PlacementKey, epoch: string) => Op<WindDownOutcome>
  // reads
  readonly placement: (bucket: number, now: number, key: PlacementKey) => Op<PlacementView | undefined>
  readonly workers: (now: number) => Op<ReadonlyArray<WorkerView>>
  /** The registry's own clock in ms, for the `/readyz` skew check. */
  readonly time: Op<number>
}
