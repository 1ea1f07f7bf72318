// The embedded registry: the reference model held in process memory (docs/deploy.md).
import { Effect } from "effect"
import type { FanOut, RegistryBackend } from "./RegistryBackend.js"
import type { RegistryPolicy } from "./Domain.js"
import { emptyBucket, type BucketState } from "./BucketState.js"
import * as Model from "./Model.js"

export interface MemoryBackend extends RegistryBackend {
  /** Test seam: forget everything in one bucket, as a Redis wipe would. */
  readonly wipe: (bucket: number) => void
  /** Test seam: the bucket's state, to check invariants against. */
  readonly inspect: (bucket: number) => Readonly<BucketState>
}

export const makeMemoryBackend = (buckets: number, policy: RegistryPolicy): MemoryBackend => {
  const state = Array.from({ length: buckets }, emptyBucket)
  const all = state.map((_, i) => i)
  const each = <A>(f: (bucket: BucketState) => A, only: ReadonlyArray<number> = all): Effect.Effect<FanOut<A>> =>
    Effect.sync(() => ({ reached: only.map((i) => [i, f(state[i]!)] as const), unreached: [] }))
  const one = <A>(bucket: number, f: (bucket: BucketState) => A) => Effect.sync(() => f(state[bucket]!))
  return {
    buckets,
    failing: () => undefined,
    register: (now, registration, only) => each((b) => Model.register(b, now, registration, policy), only),
    heartbeat: (now, beat) => each((b) => Model.heartbeat(b, now, beat, policy)),
    deregister: (_now, worker, incarnation) => each((b) => Model.deregister(b, worker, incarnation)),
    nack: (now, worker) => each((b) => Model.nack(b, now, worker, policy)),
    sweep: (now) => each((b) => Model.sweep(b, now)),
    resolve: (bucket, now, query) => one(bucket, (b) => Model.resolve(b, now, query, policy)),
    release: (bucket, now, key, epoch, owners) => one(bucket, (b) => Model.release(b, now, key, epoch, owners)),
    tag: (bucket, now, key, epoch, value, owners) => one(bucket, (b) => Model.tag(b, now, key, epoch, value, owners)),
    beginWindDown: (bucket, now, key, epoch) => one(bucket, (b) => Model.beginWindDown(b, now, key, epoch, policy)),
    placement: (bucket, now, key) => one(bucket, (b) => Model.placement(b, now, key)),
    callerPlacement: (bucket, now, key, worker) => one(bucket, (b) => Model.callerPlacement(b, now, key, worker)),
    workers: (now, after, limit) => one(0, (b) => Model.workers(b, now, policy).filter((w) => w.worker > after).slice(0, limit)),
    placementsHeld: (_now, workers) => each((b) => Model.placementsHeld(b, workers)),
    time: Effect.clockWith((clock) => clock.currentTimeMillis),
    wipe: (bucket) => {
      state[bucket] = emptyBucket()
    },
    inspect: (bucket) => state[bucket]!
  }
}

/** The embedded registry, with the warning that it holds for one Pinboard process only. */
export const embeddedBackend = (buckets: number, policy: RegistryPolicy): Effect.Effect<MemoryBackend> =>
  Effect.andThen(
    Effect.logWarning("no Redis configured: using the embedded registry (one Pinboard process only)"),
    Effect.sync(() => makeMemoryBackend(buckets, policy))
  )
