// The registry service (docs/registry-api.md, docs/protocol.md "Resolution"): what it answers and
// its layer, made over the backend in context (RegistryOnBackend.ts) with the sweep running
// beside it (RegistrySweep.ts).
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../AppConfig.js"
import { takeoverOf } from "../Config.js"
import type {
  BindingHeldByAnotherEnv,
  ClockOffsetTooLarge,
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
import { Metrics } from "../observe/Metrics.js"
import { Backend } from "./Backend.js"
import type { ClockReading } from "./ClockReading.js"
import type {
  CallerPlacement,
  CasOutcome,
  NamespaceRegistration,
  OwnerGrant,
  PlacementKey,
  PlacementView,
  WindDownDue,
  WindDownOutcome,
  WorkerView
} from "./Domain.js"
import { policyOf } from "./Policy.js"
import { RegistryClock } from "./RegistryClock.js"
import { makeRegistry } from "./RegistryOnBackend.js"
import { sweepForever } from "./RegistrySweep.js"

export interface RegisterInput {
  readonly worker: string
  readonly advertiseUrl: string
  readonly namespaces: ReadonlyArray<NamespaceRegistration>
  readonly headroom: number
  readonly draining: boolean
  /** The registration epoch for hostname bindings; "0" when absent. */
  readonly epoch?: string
  /** The incarnation's caller key, when the API minted one: kept in its record in every bucket, shown by no read. */
  readonly callerKey: string | undefined
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

/** Why a resolve places nothing: the catalogue errors of docs/protocol.md "Resolution". */
export type ResolveRefusal =
  | UnknownNamespace
  | RegistryColdStart
  | NoLiveBackends
  | TakeoverInProgress
  | PlacementHeldByAnotherHostname
  | HostnameBindingDisplaced

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
  /** With `owners` (a worker credential's), a row of a worker they do not cover is HeldByAnotherWorker. */
  readonly release: (key: PlacementKey, epoch: string, owners?: OwnerGrant) => RegistryOp<CasOutcome>
  readonly tag: (key: PlacementKey, epoch: string, tag: string, owners?: OwnerGrant) => RegistryOp<CasOutcome>
  readonly nack: (worker: string) => RegistryOp<void>
  readonly beginWindDown: (key: PlacementKey, epoch: string) => RegistryOp<WindDownOutcome>
  readonly placement: (key: PlacementKey) => RegistryOp<PlacementView, NotPlaced>
  /** The key's row (as `placement` reads it, or none) and `worker`'s incarnation and caller key in that bucket, in one call. */
  readonly callerPlacement: (key: PlacementKey, worker: string) => RegistryOp<CallerPlacement>
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

export class Registry extends Context.Service<Registry, RegistryService>()("pinboard/Registry") {
  /** Over the backend in context, on the registry's clock; resolves timed and counted when metrics are on; swept. */
  static readonly layer: Layer.Layer<Registry, never, Backend | RegistryClock | Metrics | AppConfig> = Layer.effect(
    Registry,
    Effect.gen(function* () {
      const config = yield* AppConfig
      const registry = makeRegistry(yield* Backend, policyOf(config), takeoverOf(config), yield* RegistryClock)
      yield* sweepForever(registry)
      return { ...registry, resolve: (yield* Metrics).meterResolve(registry.resolve) }
    })
  )

  /** A registry of the test's making in place of the layer (the pipeline harness wraps the real one). */
  static readonly layerTest = (registry: RegistryService): Layer.Layer<Registry> => Layer.succeed(Registry, registry)
}
