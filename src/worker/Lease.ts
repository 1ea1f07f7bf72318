// The worker's lease (DESIGN 4, 10): register, heartbeat every `heartbeatMs`, retry on a
// schedule when Pinboard does not answer, and know whether the lease is healthy: the last
// confirmed lease end, minus a safety margin, is still ahead. The lease end is counted on
// the worker's own clock from when the confirming call was sent (Pinboard set it later), so
// clock skew between the two machines cannot stretch it. When the lease turns unhealthy, or
// Pinboard answers 410, every activation is dropped before Pinboard could place its id
// elsewhere; after a 410 the worker registers again. Runs on Clock: TestClock drives it.
import { Clock, Deferred, Duration, Effect, Fiber, Schedule, type Scope } from "effect"
import type { RegistryClient, WindDownEntry, WorkerStatus } from "./RegistryClient.js"

export type DropReason = "lease-unhealthy" | "lease-lost"

export interface LeaseHooks {
  /** Every activation must go now. */
  readonly dropAll: (reason: DropReason) => Effect.Effect<void>
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
  /** True while new activations may be taken. */
  readonly healthy: () => boolean
  readonly incarnation: () => string | undefined
  /** Completes once the first registration is through. */
  readonly registered: Effect.Effect<void>
  /** Stops heartbeating and deregisters (every placement of this incarnation ends). */
  readonly deregister: Effect.Effect<void>
}

/** Register and heartbeat retries: quick at first, then every 2 s at most. */
export const REGISTRY_RETRY = Schedule.exponential(Duration.millis(100), 2).pipe(
  Schedule.either(Schedule.spaced(Duration.seconds(2)))
)

interface Held {
  readonly incarnation: string
  readonly leaseMs: number
  readonly heartbeatMs: number
  readonly marginMs: number
  /** Local clock: the lease is confirmed until then. */
  confirmedUntil: number
}

export const keepLease = (client: RegistryClient, hooks: LeaseHooks, options: LeaseOptions = {}): Effect.Effect<Lease, never, Scope.Scope> =>
  Effect.gen(function* () {
    const clock = yield* Effect.clock
    let held: Held | undefined
    let dropped = true
    const firstRegistration = yield* Deferred.make<void>()

    const healthyAt = (now: number) => held !== undefined && now < held.confirmedUntil - held.marginMs
    const healthy = () => healthyAt(clock.unsafeCurrentTimeMillis())

    const drop = (reason: DropReason) =>
      Effect.suspend(() => {
        if (dropped) return Effect.void
        dropped = true
        return hooks.dropAll(reason)
      })

    const register: Effect.Effect<Held> = Effect.gen(function* () {
      const sentAt = yield* Clock.currentTimeMillis
      const registration = yield* Effect.tryPromise(() => client.register(hooks.status())).pipe(
        Effect.tapError((error) => Effect.logWarning(`pinboard worker: register failed (${String(error.error)}); retrying`)),
        Effect.retry(REGISTRY_RETRY),
        Effect.orDie
      )
      return {
        ...registration,
        marginMs: options.safetyMarginMs ?? Math.floor(registration.leaseMs / 5),
        confirmedUntil: sentAt + registration.leaseMs
      }
    })

    /** One heartbeat; false when the lease is lost. Failures are retried until the lease is unhealthy. */
    const beat = (lease: Held): Effect.Effect<boolean> =>
      Effect.gen(function* () {
        const sentAt = yield* Clock.currentTimeMillis
        const answer = yield* Effect.tryPromise(() => client.heartbeat(lease.incarnation, hooks.status()))
        if (answer._tag === "LeaseLost") return false
        lease.confirmedUntil = Math.max(lease.confirmedUntil, sentAt + lease.leaseMs)
        dropped = false
        if (answer.windDown.length > 0) yield* hooks.windDown(answer.windDown)
        return true
      }).pipe(
        Effect.tapError((error) => Effect.logWarning(`pinboard worker: heartbeat failed (${String(error.error)}); retrying`)),
        Effect.retry(REGISTRY_RETRY),
        Effect.orDie
      )

    // Registered, then heartbeat every heartbeatMs; on 410, drop everything and register again.
    const run: Effect.Effect<never> = Effect.forever(
      Effect.gen(function* () {
        held = yield* register
        dropped = false
        yield* Deferred.succeed(firstRegistration, undefined)
        for (;;) {
          yield* Effect.sleep(Duration.millis(held.heartbeatMs))
          if (!(yield* beat(held))) break
        }
        // Unhealthy first, so that no new activation is taken while the old ones are dropped.
        held = undefined
        yield* drop("lease-lost")
      })
    )

    // Wakes when the confirmed lease, less the margin, runs out; drops everything unless renewed.
    const watch: Effect.Effect<never> = Effect.forever(
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        if (held !== undefined && !healthyAt(now)) yield* drop("lease-unhealthy")
        const wakeAt = held !== undefined && healthyAt(now) ? held.confirmedUntil - held.marginMs : now + 100
        yield* Effect.sleep(Duration.millis(Math.max(1, wakeAt - now)))
      })
    )

    const fibers = yield* Effect.all([Effect.forkScoped(run), Effect.forkScoped(watch)])
    return {
      healthy,
      incarnation: () => held?.incarnation,
      registered: Deferred.await(firstRegistration),
      deregister: Effect.gen(function* () {
        yield* Fiber.interruptAll(fibers)
        const lease = held
        held = undefined
        if (lease !== undefined) yield* Effect.ignore(Effect.tryPromise(() => client.deregister(lease.incarnation)))
      })
    }
  })
