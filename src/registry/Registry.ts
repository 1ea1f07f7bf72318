// The registry service (docs/registry-api.md, docs/protocol.md "Resolution"): bucket hashing, `now` from the
// registry's one clock (RegistryClock.ts) and the two random numbers from Random around a
// backend (the embedded one of Memory.ts or Redis.ts's), and the sweep that runs beside it.
import { Context, Duration, Effect, Layer, Random, Schedule } from "effect"
import { AppConfig } from "../AppConfig.js"
import { takeoverOf } from "../Config.js"
import { DEFAULT_TAKEOVER } from "../config/Fields.js"
import {
  BindingHeldByAnotherEnv,
  type ClockOffsetTooLarge,
  HostnameBindingDisplaced,
  LeaseLost,
  NoLiveBackends,
  NotPlaced,
  PlacementHeldByAnotherHostname,
  RegistryColdStart,
  RegistryUnavailable,
  TakeoverInProgress,
  UnknownNamespace
} from "../Errors.js"
import { Backend } from "./Backend.js"
import type { FanOut, RegistryBackend } from "./RegistryBackend.js"
import { bucketOf } from "../contract/Bucket.js"
import { bindingKey } from "./Hostnames.js"
import type {
  CasOutcome,
  NamespaceRegistration,
  PlacementKey,
  PlacementView,
  RegisterOutcome,
  RegistryPolicy,
  ResolveOutcome,
  ResolveQuery,
  WindDownDue,
  WindDownOutcome,
  WorkerRegistration,
  WorkerView
} from "./Domain.js"
import { Metrics } from "../observe/Metrics.js"
import { meteredResolve } from "../observe/ResolveMetrics.js"
import { policyOf, type TakeoverOf } from "./Policy.js"
import type { ClockReading } from "./ClockReading.js"
import { localRegistryClock, RegistryClock, type RegistryClockService } from "./RegistryClock.js"

export interface RegisterInput {
  readonly worker: string
  readonly advertiseUrl: string
  readonly namespaces: ReadonlyArray<NamespaceRegistration>
  readonly headroom: number
  readonly draining: boolean
  /** The registration epoch for hostname bindings; "0" when absent. */
  readonly epoch?: string
}

export interface RegisterAnswer {
  readonly worker: string
  readonly incarnation: string
  readonly leaseMs: number
  readonly heartbeatMs: number
  readonly leaseExpiresAt: number
  readonly buckets: number
  /** Buckets whose shard this call did not reach: the lease does not hold for their ids. */
  readonly unrenewed: ReadonlyArray<number>
}

export interface HeartbeatInput {
  readonly incarnation: string
  readonly headroom: number
  readonly draining: boolean
  readonly degraded: boolean
}

export interface HeartbeatAccepted {
  readonly leaseExpiresAt: number
  readonly windDown: ReadonlyArray<WindDownDue>
  /** Buckets whose shard this call did not reach: the lease was not renewed for their ids. */
  readonly unrenewed: ReadonlyArray<number>
}

/** Placement rows per worker, summed over the buckets that answered. */
export interface PlacementsHeld {
  /** In the order of the workers asked for. */
  readonly counts: ReadonlyArray<number>
  /** Buckets not counted (a Redis Cluster shard down): the counts miss their rows. */
  readonly unreached: ReadonlyArray<number>
}

export interface ResolveRequest extends PlacementKey {
  /** The request's hostname in hostname-aware mode, else "". */
  readonly hostname: string
  /** The calling instance's worker, for attested calls. */
  readonly caller: string | undefined
  readonly affinity: string
  readonly excluded: ReadonlyArray<string>
}

export interface Placement {
  /** The env the id is placed in: the request's, or in hostname-aware mode its pair's binding. */
  readonly env: string
  readonly worker: string
  readonly advertiseUrl: string
  readonly epoch: string
  readonly isNew: boolean
}

/** Why the registry cannot be asked now: unreachable, or this process out of bound with its clock. */
export type RegistryDown = RegistryUnavailable | ClockOffsetTooLarge

/** Every operation needs the registry's time (RegistryClock.ts). */
type RegistryOp<A, E = never> = Effect.Effect<A, E | RegistryDown>

export interface RegistryService {
  readonly leaseMs: number
  readonly register: (input: RegisterInput) => RegistryOp<RegisterAnswer, BindingHeldByAnotherEnv>
  readonly heartbeat: (worker: string, input: HeartbeatInput) => RegistryOp<HeartbeatAccepted, LeaseLost>
  readonly deregister: (worker: string, incarnation: string) => RegistryOp<void>
  readonly resolve: (request: ResolveRequest) => RegistryOp<Placement, ResolveRefusal>
  readonly release: (key: PlacementKey, epoch: string) => RegistryOp<CasOutcome>
  readonly tag: (key: PlacementKey, epoch: string, tag: string) => RegistryOp<CasOutcome>
  readonly nack: (worker: string) => RegistryOp<void>
  readonly beginWindDown: (key: PlacementKey, epoch: string) => RegistryOp<WindDownOutcome>
  readonly placement: (key: PlacementKey) => RegistryOp<PlacementView, NotPlaced>
  /** Every worker, read page by page. */
  readonly workers: RegistryOp<ReadonlyArray<WorkerView>>
  /** At most `limit` workers after the worker id `after` ("" from the first), in worker id order. */
  readonly workersPage: (after: string, limit: number) => RegistryOp<ReadonlyArray<WorkerView>>
  /** How many placements each of `workers` holds, over every bucket reached (the fleet page). */
  readonly placementsHeld: (workers: ReadonlyArray<string>) => RegistryOp<PlacementsHeld>
  /** Ends placements and forgets workers that are gone (docs/protocol.md). */
  readonly sweep: RegistryOp<void>
  /** The registry's time as this process reads it (RegistryClock.ts). */
  readonly now: RegistryOp<number>
  /** One call that only checks the registry answers, for `/readyz`. */
  readonly ping: Effect.Effect<void, RegistryUnavailable>
  /** What the registry's clock tells this process now, for `/readyz`. */
  readonly clockReading: Effect.Effect<ClockReading>
}

/** Ended rows go within two leases: the sweep runs every half lease. */
export const sweepSchedule = (leaseMs: number) => Schedule.spaced(Duration.millis(leaseMs / 2))

/**
 * Runs the sweep on its schedule for as long as the scope lasts. A failed run is logged; so is a
 * defect (an unexpected reply from Redis), and the next run is tried all the same.
 */
const sweepForever = (registry: RegistryService) =>
  registry.sweep.pipe(
    // Why the registry is down is logged once, where it is noticed (RedisHealth.ts, RegistryClock.ts).
    Effect.catch((error) => Effect.logDebug("registry sweep failed").pipe(Effect.annotateLogs({ error: error._tag }))),
    Effect.catchDefect((defect) => Effect.logError("registry sweep failed", defect)),
    Effect.repeat(sweepSchedule(registry.leaseMs)),
    Effect.forkScoped
  )

export class Registry extends Context.Service<Registry, RegistryService>()("pinboard/Registry") {
  /** Over the backend in context, on the registry's clock; resolves timed and counted when metrics are on; swept. */
  static readonly layer: Layer.Layer<Registry, never, Backend | RegistryClock | Metrics | AppConfig> = Layer.effect(
    Registry,
    Effect.gen(function* () {
      const config = yield* AppConfig
      const registry = makeRegistry(yield* Backend, policyOf(config), takeoverOf(config), yield* RegistryClock)
      yield* sweepForever(registry)
      return { ...registry, resolve: meteredResolve(registry.resolve, yield* Metrics) }
    })
  )

  /** A registry of the test's making in place of the layer (the pipeline harness wraps the real one). */
  static readonly layerTest = (registry: RegistryService): Layer.Layer<Registry> => Layer.succeed(Registry, registry)
}

// Half-open, as Effect 3 drew them: [min, max).
const hex32 = Random.nextIntBetween(0, 0x10000, { halfOpen: true }).pipe(
  Effect.map((n) => n.toString(16).padStart(4, "0")),
  Effect.replicate(4),
  Effect.all
)
const newIncarnation = Effect.map(hex32, (parts) => parts.join(""))

const byDeadline = (a: WindDownDue, b: WindDownDue): number =>
  a.deadline - b.deadline || (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/** A fan-out that reached no bucket at all is the registry being unavailable. */
const reachedAny = <A>(out: FanOut<A>): Effect.Effect<FanOut<A>, RegistryUnavailable> =>
  out.reached.length > 0 ? Effect.succeed(out) : Effect.fail(out.failure ?? new RegistryUnavailable({}))

/**
 * A registration that names hostnames, in bucket 0 first and in the other buckets only when its
 * bindings stood there. Every bucket decides bindings alike, but two registrations racing through
 * two Pinboards (equal epochs, different envs) could reach the buckets in different orders and
 * leave them bound to different envs. Bucket 0 serializes them: the loser writes nothing.
 */
const registerBindingFirst = (
  backend: RegistryBackend,
  at: number,
  registration: WorkerRegistration
): Effect.Effect<FanOut<RegisterOutcome>, RegistryUnavailable> =>
  Effect.gen(function* () {
    const first = yield* backend.register(at, registration, [0])
    yield* reachedAll(first)
    if (first.reached.some(([, outcome]) => outcome._tag === "BindingConflict")) return first
    const rest = yield* backend.register(at, registration, Array.from({ length: backend.buckets - 1 }, (_, i) => i + 1))
    return { ...rest, reached: [...first.reached, ...rest.reached] }
  })

/** A fan-out that must reach every bucket (a retry finishes the job: these calls are idempotent). */
const reachedAll = <A>(out: FanOut<A>): Effect.Effect<void, RegistryUnavailable> =>
  out.unreached.length === 0 ? Effect.void : Effect.fail(out.failure ?? new RegistryUnavailable({}))

/** Workers per placement count call: each script call does a bounded slice (docs/protocol.md "Cost at scale"). */
const HELD_SLICE = 256

const slices = <A>(items: ReadonlyArray<A>, size: number): ReadonlyArray<ReadonlyArray<A>> =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size))

/** Each worker's count, added up over the buckets reached. */
const sumByWorker = (workers: number, out: FanOut<ReadonlyArray<number>>): ReadonlyArray<number> => {
  const sums = new Array<number>(workers).fill(0)
  for (const [, counts] of out.reached) counts.forEach((count, i) => (sums[i]! += Number(count)))
  return sums
}

/** Workers per page when the whole membership is read. */
const WORKERS_PAGE = 256

const allWorkers = (backend: RegistryBackend, at: number): Effect.Effect<ReadonlyArray<WorkerView>, RegistryUnavailable> =>
  Effect.gen(function* () {
    const workers: Array<WorkerView> = []
    for (;;) {
      const page = yield* backend.workers(at, workers.at(-1)?.worker ?? "", WORKERS_PAGE)
      workers.push(...page)
      if (page.length < WORKERS_PAGE) return workers
    }
  })

/** Why a resolve places nothing: the catalogue errors of docs/protocol.md "Resolution". */
export type ResolveRefusal =
  | UnknownNamespace
  | RegistryColdStart
  | NoLiveBackends
  | TakeoverInProgress
  | PlacementHeldByAnotherHostname
  | HostnameBindingDisplaced

/** A pair rebound again while its resolve was being retried: the binding is moving; retry shortly. */
const REBOUND_RETRY_MS = 1000

/**
 * The time a refusal has left, at most one lease: a cold-start marker or a deadline may have been
 * stamped by a call whose `now` was read a moment after this query's, yet none outlasts one
 * lease from the registry's present.
 */
const timeLeftMs = (retryAfterMs: number, leaseMs: number): number => Math.min(retryAfterMs, leaseMs)

const placedOrRefused = (outcome: ResolveOutcome, env: string, leaseMs: number): Effect.Effect<Placement, ResolveRefusal> => {
  switch (outcome._tag) {
    case "Placed":
      return Effect.succeed({ env, worker: outcome.worker, advertiseUrl: outcome.advertiseUrl, epoch: outcome.epoch, isNew: outcome.isNew })
    case "UnknownNamespace":
      return new UnknownNamespace()
    case "ColdStart":
      return new RegistryColdStart({ retryAfterMs: timeLeftMs(outcome.retryAfterMs, leaseMs) })
    case "NoLiveBackends":
      return new NoLiveBackends()
    case "TakeoverInProgress":
      return new TakeoverInProgress({ retryAfterMs: timeLeftMs(outcome.retryAfterMs, leaseMs) })
    case "HeldByAnotherHostname":
      return new PlacementHeldByAnotherHostname()
    case "Displaced":
      return new HostnameBindingDisplaced({ retryAfterMs: timeLeftMs(outcome.retryAfterMs, leaseMs) })
    case "Rebound":
      return new HostnameBindingDisplaced({ retryAfterMs: REBOUND_RETRY_MS })
  }
}

/** The two random numbers of a placement: 26-bit halves of one draw, exact in both layers. */
const DICE = 2 ** 26
const twoRandomNumbers = Random.nextIntBetween(0, DICE * DICE, { halfOpen: true })

/** Affinity values are header or cookie text; a line break never reaches the registry. */
const oneLine = (text: string): string => (text.includes("\n") ? text.replaceAll("\n", " ") : text)

export const makeRegistry = (
  backend: RegistryBackend,
  policy: RegistryPolicy,
  takeoverOf: TakeoverOf = () => DEFAULT_TAKEOVER,
  clock: RegistryClockService = localRegistryClock
): RegistryService => {
  const now = clock.now
  const bucket = (key: PlacementKey) => bucketOf(key.env, key.namespace, key.id, backend.buckets)
  /** bindingKey(hostname, namespace) -> the env last learnt for it (hostname-aware mode). */
  const boundEnvs = new Map<string, string>()
  return {
    leaseMs: policy.leaseMs,
    register: (input) =>
      Effect.gen(function* () {
        const at = yield* now
        const incarnation = yield* newIncarnation
        const registration = { ...input, incarnation }
        const out = yield* Effect.flatMap(
          input.namespaces.some((entry) => entry.hostname !== "") ? registerBindingFirst(backend, at, registration) : backend.register(at, registration),
          reachedAny
        )
        if (out.reached.some(([, outcome]) => outcome._tag === "BindingConflict")) return yield* new BindingHeldByAnotherEnv()
        return {
          worker: input.worker,
          incarnation,
          leaseMs: policy.leaseMs,
          heartbeatMs: Math.floor(policy.leaseMs / 3),
          leaseExpiresAt: at + policy.leaseMs,
          buckets: backend.buckets,
          unrenewed: out.unreached
        }
      }),
    heartbeat: (worker, input) =>
      Effect.gen(function* () {
        const at = yield* now
        const out = yield* Effect.flatMap(backend.heartbeat(at, { worker, ...input }), reachedAny)
        const windDown: Array<WindDownDue> = []
        for (const [, answer] of out.reached) {
          if (answer._tag === "LeaseLost") return yield* new LeaseLost()
          windDown.push(...answer.windDown)
        }
        return { leaseExpiresAt: at + policy.leaseMs, windDown: windDown.sort(byDeadline), unrenewed: out.unreached }
      }),
    deregister: (worker, incarnation) =>
      Effect.flatMap(now, (at) => backend.deregister(at, worker, incarnation)).pipe(Effect.flatMap(reachedAll)),
    resolve: (request) => {
      // In hostname-aware mode the env is the pair's binding, learnt from the registry: any bucket
      // knows it and answers Rebound when the env tried is not it; the id's bucket is then asked.
      const pair = request.hostname === "" ? undefined : bindingKey(request.hostname, request.namespace)
      const resolveIn = (env: string) =>
        Effect.flatMap(now, (at) =>
          Effect.flatMap(twoRandomNumbers, (dice) => {
            const query: ResolveQuery = {
              env,
              namespace: request.namespace,
              id: request.id,
              hostname: request.hostname,
              takeover: takeoverOf(env),
              caller: request.caller,
              affinity: oneLine(request.affinity),
              excluded: request.excluded,
              r1: Math.floor(dice / DICE) / DICE,
              r2: (dice % DICE) / DICE
            }
            return backend.resolve(bucket(query), at, query)
          })
        )
      const env = (pair === undefined ? undefined : boundEnvs.get(pair)) ?? request.env
      return Effect.flatMap(resolveIn(env), (outcome) => {
        if (outcome._tag !== "Rebound" || pair === undefined) return placedOrRefused(outcome, env, policy.leaseMs)
        boundEnvs.set(pair, outcome.env)
        return Effect.flatMap(resolveIn(outcome.env), (again) => placedOrRefused(again, outcome.env, policy.leaseMs))
      })
    },
    release: (key, epoch) => Effect.flatMap(now, (at) => backend.release(bucket(key), at, key, epoch)),
    tag: (key, epoch, value) => Effect.flatMap(now, (at) => backend.tag(bucket(key), at, key, epoch, value)),
    nack: (worker) => Effect.flatMap(now, (at) => backend.nack(at, worker)).pipe(Effect.flatMap(reachedAny), Effect.asVoid),
    beginWindDown: (key, epoch) => Effect.flatMap(now, (at) => backend.beginWindDown(bucket(key), at, key, epoch)),
    placement: (key) =>
      Effect.flatMap(now, (at) => backend.placement(bucket(key), at, key)).pipe(
        Effect.flatMap((view) => (view === undefined ? new NotPlaced() : Effect.succeed(view)))
      ),
    workers: Effect.flatMap(now, (at) => allWorkers(backend, at)),
    workersPage: (after, limit) => Effect.flatMap(now, (at) => backend.workers(at, after, limit)),
    placementsHeld: (workers) =>
      Effect.flatMap(now, (at) =>
        Effect.forEach(slices(workers, HELD_SLICE), (slice) =>
          Effect.flatMap(backend.placementsHeld(at, slice), reachedAny).pipe(
            Effect.map((out) => ({ counts: sumByWorker(slice.length, out), unreached: out.unreached }))
          )
        )
      ).pipe(
        Effect.map((parts) => ({
          counts: parts.flatMap((part) => part.counts),
          unreached: [...new Set(parts.flatMap((part) => part.unreached))].sort((a, b) => a - b)
        }))
      ),
    sweep: Effect.flatMap(now, (at) => backend.sweep(at)).pipe(Effect.flatMap(reachedAll)),
    now,
    ping: Effect.asVoid(backend.time),
    clockReading: clock.reading
  }
}
