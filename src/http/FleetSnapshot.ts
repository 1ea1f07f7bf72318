// What `GET /fleet.json` on the metrics listener answers, and the fleet page shows
// (docs/operations.md "The fleet page"): the registry's workers as `GET /registry/workers`
// lists them (lease left, headroom, draining, degraded, nacks), the placements each holds, and
// this Pinboard's own requests and errors per second (Rates.ts).
import { Effect } from "effect"
import type { NamespaceRegistration, WorkerView } from "../registry/Domain.js"
import type { PlacementsHeld, RegistryDown, RegistryService } from "../registry/Registry.js"
import type { RateSeries } from "../observe/Rates.js"

export interface FleetWorker {
  readonly worker: string
  readonly advertiseUrl: string
  /** `/threads`, or in hostname-aware mode `/threads@a.example (env "prod")`. */
  readonly namespaces: ReadonlyArray<string>
  readonly headroom: number
  /** `leaseExpiresAt` minus Pinboard's clock; 0 or less: lapsed, listed until the sweep removes it. */
  readonly leaseLeftMs: number
  readonly draining: boolean
  readonly degraded: boolean
  readonly nacks: number
  /** Placement rows naming the worker, over the buckets counted (ended ones until swept). */
  readonly placements: number
}

export interface FleetSnapshot {
  /** Pinboard's clock when the registry was read, ms since the epoch. */
  readonly now: number
  readonly leaseMs: number
  readonly buckets: number
  /** Buckets whose placements could not be counted (a Redis Cluster shard down); usually empty. */
  readonly uncountedBuckets: ReadonlyArray<number>
  /** In worker id order. */
  readonly workers: ReadonlyArray<FleetWorker>
  /** This Pinboard process's requests and 5xx per second, not the whole deployment's. */
  readonly rates: RateSeries
}

const namespaceText = (entry: NamespaceRegistration): string =>
  entry.hostname === "" ? entry.namespace : `${entry.namespace}@${entry.hostname} (env ${JSON.stringify(entry.env)})`

export const fleetSnapshot = (input: {
  readonly now: number
  readonly leaseMs: number
  readonly buckets: number
  readonly workers: ReadonlyArray<WorkerView>
  readonly held: PlacementsHeld
  readonly rates: RateSeries
}): FleetSnapshot => ({
  now: input.now,
  leaseMs: input.leaseMs,
  buckets: input.buckets,
  uncountedBuckets: input.held.unreached,
  workers: input.workers.map((view, i) => ({
    worker: view.worker,
    advertiseUrl: view.advertiseUrl,
    namespaces: view.namespaces.map(namespaceText),
    headroom: view.headroom,
    leaseLeftMs: view.leaseExpiresAt - input.now,
    draining: view.draining,
    degraded: view.degraded,
    nacks: view.nacks,
    placements: input.held.counts[i] ?? 0
  })),
  rates: input.rates
})

/** Reads the registry (every worker, then their placements) and puts the rates beside it. */
export const readFleet = (
  registry: RegistryService,
  buckets: number,
  rates: () => RateSeries
): Effect.Effect<FleetSnapshot, RegistryDown> =>
  Effect.gen(function* () {
    const workers = yield* registry.workers
    const held = yield* registry.placementsHeld(workers.map((view) => view.worker))
    const now = yield* registry.now
    return fleetSnapshot({ now, leaseMs: registry.leaseMs, buckets, workers, held, rates: rates() })
  })
