// The worker's lease (docs/registry-api.md, docs/worker.md): register, heartbeat every `heartbeatMs`, retry on a
// schedule when Pinboard does not answer, and know whether the lease is healthy: the last
// confirmed lease end, minus a safety margin, is still ahead. The lease end is counted on
// the worker's own monotonic clock from when the confirming call was sent (Pinboard set it
// later), so neither clock skew between the two machines nor a step of the worker's wall
// clock can stretch it. When the lease turns unhealthy, or
// Pinboard answers 410, every activation is dropped before Pinboard could place its id
// elsewhere; after a 410 the worker registers again. Runs on Clock: TestClock drives it.
//
// On a Redis Cluster a call can renew the lease in some buckets and not others (a shard is
// down: the answer lists it in `unrenewed`). So the lease end is kept per bucket, and only
// the activations whose bucket went unconfirmed are dropped; the rest keep serving.
//
// A call Pinboard refuses (401, 403: the credential does not cover it) is retried on the same
// schedule as one that got no answer, its refusal logged as an error with Pinboard's text.
import { Clock, Data, Deferred, Duration, Effect, Fiber, Schedule, type Scope } from "effect"
import { monotonicMillis } from "../serving/Monotonic.js"
import { bucketOf } from "../contract/Bucket.js"
import type { CallerSigningKey } from "./Call.js"
import { logCallError, REGISTRY_RETRY, registryCall } from "./RegistryCall.js"
import type { PlacementRef, RegistryClient, WindDownEntry, WorkerStatus } from "./RegistryClient.js"

export type DropReason = "lease-unhealthy" | "lease-lost"

/** Which activations to drop: those whose placement the predicate accepts. */
export type Selection = (placement: PlacementRef) => boolean

export interface LeaseHooks {
  /** The selected activations (every one, without a selection) must go now. */
  readonly drop: (reason: DropReason, which?: Selection) => Effect.Effect<void>
  /** Placements the heartbeat listed for wind-down. */
  readonly windDown: (entries: ReadonlyArray<WindDownEntry>) => Effect.Effect<void>
  /** Headroom and draining, as of now. */
  readonly status: () => WorkerStatus
}

export interface LeaseOptions {
  /** How long before the confirmed lease end the worker stops serving; default a fifth of the lease. */
  readonly safetyMarginMs?: number
}

export interface Lease {
  /** True while the lease holds in every bucket. */
  readonly healthy: () => boolean
  /** True while a new activation of this placement may be taken: the lease holds in its bucket. */
  readonly healthyFor: (placement: PlacementRef) => boolean
  readonly incarnation: () => string | undefined
  /** The incarnation's key for caller tokens (`kid` the incarnation), when its register answer carried one. */
  readonly callerKey: () => CallerSigningKey | undefined
  /** Completes once the first registration is through. */
  readonly registered: Effect.Effect<void>
  /** Stops heartbeating and deregisters (every placement of this incarnation ends). */
  readonly deregister: Effect.Effect<void>
}

/**
 * Heartbeats at a fixed rate, the first one interval after the registration: a slow answer
 * (a Cluster shard down costs about a second) must not stretch the interval between them.
 */
export const heartbeatEvery = (heartbeatMs: number) => Schedule.fixed(Duration.millis(heartbeatMs))

/** With no lease held (registering, or registering again), the watch looks again this often. */
const UNLEASED_WATCH_INTERVAL = Duration.millis(100)

/** A heartbeat answered 410 lease lost (Errors.ts LeaseLost, as this worker hears it). */
class HeartbeatLeaseLost extends Data.TaggedError("HeartbeatLeaseLost")<{}> {}

interface Held {
  readonly incarnation: string
  readonly leaseMs: number
  readonly heartbeatMs: number
  readonly marginMs: number
  readonly callerKey: CallerSigningKey | undefined
  /** Local clock, per bucket (one entry when Pinboard names no buckets): confirmed until then. */
  readonly confirmedUntil: Array<number>
}

/** Each bucket's lease end moves to `until`, except the unrenewed ones. */
const confirm = (held: Held, until: number, unrenewed: ReadonlyArray<number>): void => {
  for (let b = 0; b < held.confirmedUntil.length; b++) {
    if (!unrenewed.includes(b)) held.confirmedUntil[b] = Math.max(held.confirmedUntil[b]!, until)
  }
}

const bucketIn = (held: Held, { env, namespace, id }: PlacementRef): number =>
  held.confirmedUntil.length === 1 ? 0 : bucketOf(env, namespace, id, held.confirmedUntil.length)

export const keepLease = (client: RegistryClient, hooks: LeaseHooks, options: LeaseOptions = {}): Effect.Effect<Lease, never, Scope.Scope> =>
  Effect.gen(function* () {
    const clock = yield* Clock.Clock
    let held: Held | undefined
    /** Buckets whose activations were dropped and that have not been confirmed since. */
    let dropped = new Set<number>()
    const firstRegistration = yield* Deferred.make<void>()

    const bucketHealthy = (lease: Held, bucket: number, now: number) => now < lease.confirmedUntil[bucket]! - lease.marginMs
    const healthy = () => {
      const now = monotonicMillis(clock)
      return held !== undefined && held.confirmedUntil.every((_, b) => bucketHealthy(held!, b, now))
    }
    const healthyFor = (placement: PlacementRef) =>
      held !== undefined && bucketHealthy(held, bucketIn(held, placement), monotonicMillis(clock))

    /** Drops the activations of buckets that turned unhealthy since the last look. */
    const dropUnhealthy = (lease: Held, now: number) =>
      Effect.suspend(() => {
        const newly = lease.confirmedUntil.flatMap((_, b) => (!bucketHealthy(lease, b, now) && !dropped.has(b) ? [b] : []))
        if (newly.length === 0) return Effect.void
        for (const b of newly) dropped.add(b)
        const unhealthy = Effect.logWarning("lease unhealthy: activations dropped").pipe(
          Effect.annotateLogs({ buckets: newly.length === lease.confirmedUntil.length ? "all" : newly.join(",") })
        )
        if (newly.length === lease.confirmedUntil.length) return Effect.andThen(unhealthy, hooks.drop("lease-unhealthy"))
        const buckets = new Set(newly)
        return Effect.andThen(unhealthy, hooks.drop("lease-unhealthy", (placement) => buckets.has(bucketIn(lease, placement))))
      })

    // Retried as a whole: the lease counts from the call that got through, not from the first try.
    const register: Effect.Effect<Held> = Effect.gen(function* () {
      const sentAt = monotonicMillis(clock)
      const registration = yield* registryCall("register", () => client.register(hooks.status()))
      const lease: Held = {
        incarnation: registration.incarnation,
        leaseMs: registration.leaseMs,
        heartbeatMs: registration.heartbeatMs,
        marginMs: options.safetyMarginMs ?? Math.floor(registration.leaseMs / 5),
        callerKey:
          registration.callerKey === undefined
            ? undefined
            : { secret: new Uint8Array(Buffer.from(registration.callerKey, "base64url")), kid: registration.incarnation },
        confirmedUntil: Array.from({ length: registration.buckets ?? 1 }, () => 0)
      }
      confirm(lease, sentAt + registration.leaseMs, registration.unrenewed)
      return lease
    }).pipe(
      Effect.tapError((error) => logCallError("register", error, ", retrying")),
      Effect.retry(REGISTRY_RETRY),
      Effect.orDie
    )

    /**
     * One heartbeat; fails with HeartbeatLeaseLost when the lease is lost. A failed call is retried
     * on REGISTRY_RETRY without end, past the lease turning unhealthy (the watch drops the
     * activations then): the first call that gets through renews the lease, or answers 410.
     */
    const beat = (lease: Held): Effect.Effect<void, HeartbeatLeaseLost> =>
      Effect.gen(function* () {
        const sentAt = monotonicMillis(clock)
        const answer = yield* registryCall("heartbeat", () => client.heartbeat(lease.incarnation, hooks.status()))
        if (answer._tag === "LeaseLost") return false
        confirm(lease, sentAt + lease.leaseMs, answer.unrenewed)
        for (const b of dropped) if (!answer.unrenewed.includes(b)) dropped.delete(b)
        if (answer.windDown.length > 0) yield* hooks.windDown(answer.windDown)
        return true
      }).pipe(
        Effect.tapError((error) => logCallError("heartbeat", error, ", retrying")),
        Effect.retry(REGISTRY_RETRY),
        Effect.orDie,
        // Raised after the retry, which must retry failed calls only, never a 410.
        Effect.flatMap((renewed) => (renewed ? Effect.void : Effect.fail(new HeartbeatLeaseLost())))
      )

    // Registered, then heartbeat every heartbeatMs; on 410, drop everything and register again.
    const run: Effect.Effect<never> = Effect.forever(
      Effect.gen(function* () {
        held = yield* register
        yield* Effect.logInfo("worker registered").pipe(Effect.annotateLogs({ incarnation: held.incarnation, lease_ms: held.leaseMs }))
        // A bucket the registration did not reach has no activations to drop.
        dropped = new Set(held.confirmedUntil.flatMap((until, b) => (until === 0 ? [b] : [])))
        yield* Deferred.succeed(firstRegistration, undefined)
        // Heartbeats until the lease is lost.
        yield* Effect.schedule(beat(held), heartbeatEvery(held.heartbeatMs)).pipe(Effect.catchTag("HeartbeatLeaseLost", () => Effect.void))
        // Unhealthy first, so that no new activation is taken while the old ones are dropped.
        const lost = held
        held = undefined
        yield* Effect.logWarning("lease lost, registering again").pipe(Effect.annotateLogs({ incarnation: lost.incarnation }))
        if (lost.confirmedUntil.some((_, b) => !dropped.has(b))) yield* hooks.drop("lease-lost")
      })
    )

    // Wakes when a bucket's confirmed lease, less the margin, runs out; drops its activations unless renewed.
    const watch: Effect.Effect<never> = Effect.forever(
      Effect.gen(function* () {
        const now = monotonicMillis(clock)
        const lease = held
        if (lease !== undefined) yield* dropUnhealthy(lease, now)
        const ends = lease === undefined ? [] : lease.confirmedUntil.map((until) => until - lease.marginMs).filter((end) => end > now)
        yield* Effect.sleep(ends.length > 0 ? Duration.millis(Math.max(1, Math.min(...ends) - now)) : UNLEASED_WATCH_INTERVAL)
      })
    )

    const fibers = yield* Effect.all([Effect.forkScoped(run), Effect.forkScoped(watch)])
    return {
      healthy,
      healthyFor,
      incarnation: () => held?.incarnation,
      callerKey: () => held?.callerKey,
      registered: Deferred.await(firstRegistration),
      deregister: Effect.gen(function* () {
        yield* Fiber.interruptAll(fibers)
        const lease = held
        held = undefined
        if (lease === undefined) return
        yield* registryCall("deregister", () => client.deregister(lease.incarnation)).pipe(
          Effect.andThen(Effect.logInfo("worker deregistered")),
          Effect.catch((error) => logCallError("deregister", error)),
          Effect.annotateLogs({ incarnation: lease.incarnation })
        )
      })
    }
  })
