// The registry's data (docs/protocol.md, docs/registry-api.md): what a bucket holds and what its operations answer.
// Outside hostname-aware mode `env` and `hostname` are "".
import type { Takeover } from "../Config.js"

export interface RegistryPolicy {
  readonly leaseMs: number
  readonly balanceFactor: number
  readonly nackThreshold: number
  readonly nackWindowMs: number
}

export interface NamespaceRegistration {
  readonly namespace: string
  readonly hostname: string
  readonly env: string
}

export interface WorkerRegistration {
  readonly worker: string
  readonly incarnation: string
  readonly advertiseUrl: string
  readonly namespaces: ReadonlyArray<NamespaceRegistration>
  readonly headroom: number
  readonly draining: boolean
  /** The registration epoch for hostname bindings (docs/registry-api.md); "0" when absent. */
  readonly epoch?: string
  /** The key this incarnation signs its caller tokens with, if one was minted: held in its record, never read back by a read. */
  readonly callerKey: string | undefined
}

/** What one bucket did with a registration: a hostname binding held by another env refuses it (docs/proxy.md "Hostname-aware mode"). */
export type RegisterOutcome = { readonly _tag: "Registered" } | { readonly _tag: "BindingConflict" }

export interface WorkerHeartbeat {
  readonly worker: string
  readonly incarnation: string
  readonly headroom: number
  readonly draining: boolean
  readonly degraded: boolean
}

export interface WorkerRecord {
  readonly worker: string
  readonly advertiseUrl: string
  readonly incarnation: string
  readonly namespaces: ReadonlyArray<NamespaceRegistration>
  readonly leaseExpiresAt: number
  readonly headroom: number
  readonly draining: boolean
  /** Self-reported; nack-degraded is derived from the nack window. */
  readonly degraded: boolean
  readonly nackWindowStart: number
  readonly nackCount: number
  /** This incarnation's caller key: only callerPlacement reads it (docs/protocol.md "Keys of one bucket"). */
  readonly callerKey: string | undefined
}

/** A worker record as the reads show it: no incarnation, no caller key. */
export type WorkerShown = Omit<WorkerRecord, "incarnation" | "callerKey">

export interface PlacementKey {
  readonly env: string
  readonly namespace: string
  readonly id: string
}

export interface PlacementRow extends PlacementKey {
  readonly worker: string
  readonly incarnation: string
  readonly epoch: string
  readonly placedAt: number
  readonly hostname: string
  readonly tag: string
  /** 0 when no wind-down deadline is set. */
  readonly windDownAt: number
}

export interface ResolveQuery extends PlacementKey {
  /** The request's hostname in hostname-aware mode; "" outside it. */
  readonly hostname: string
  /** The env's takeover (docs/proxy.md "Hostname-aware mode"), for a placement held through another hostname. */
  readonly takeover: Takeover
  readonly caller: string | undefined
  readonly affinity: string
  readonly excluded: ReadonlyArray<string>
  readonly r1: number
  readonly r2: number
}

export type ResolveOutcome =
  | { readonly _tag: "Placed"; readonly worker: string; readonly advertiseUrl: string; readonly epoch: string; readonly isNew: boolean }
  | { readonly _tag: "UnknownNamespace" }
  | { readonly _tag: "ColdStart"; readonly retryAfterMs: number }
  | { readonly _tag: "NoLiveBackends" }
  // hostname-aware mode (docs/protocol.md "Resolution" steps 1 to 3)
  /** The (hostname, namespace) pair is bound to another env than the query's: resolve there. */
  | { readonly _tag: "Rebound"; readonly env: string }
  | { readonly _tag: "TakeoverInProgress"; readonly retryAfterMs: number }
  | { readonly _tag: "HeldByAnotherHostname" }
  | { readonly _tag: "Displaced"; readonly retryAfterMs: number }

/**
 * Release and tag are compare-and-set on the row's epoch; `current` is the row's epoch or null.
 * Asked with an owner grant, a row whose worker the grant does not cover is HeldByAnotherWorker,
 * whatever its epoch (which it does not tell).
 */
export type CasOutcome =
  | { readonly _tag: "Done" }
  | { readonly _tag: "Conflict"; readonly current: string | null }
  | { readonly _tag: "HeldByAnotherWorker" }

/** The worker ids a worker credential covers: these ids, and every id starting with one of the prefixes (`chat-*` is the prefix `chat-`). */
export interface OwnerGrant {
  readonly exact: ReadonlyArray<string>
  readonly prefixes: ReadonlyArray<string>
}

export const ownerGrantCovers = (grant: OwnerGrant, worker: string): boolean =>
  grant.exact.includes(worker) || grant.prefixes.some((prefix) => worker.startsWith(prefix))

export interface WindDownDue extends PlacementKey {
  readonly epoch: string
  readonly deadline: number
}

export type WindDownOutcome = { readonly _tag: "WindingDown"; readonly deadline: number } | { readonly _tag: "Conflict"; readonly current: string | null }

export type BucketHeartbeat =
  | { readonly _tag: "Renewed"; readonly windDown: ReadonlyArray<WindDownDue> }
  | { readonly _tag: "LeaseLost" }

export interface PlacementView extends PlacementRow {
  readonly advertiseUrl: string | null
  readonly live: boolean
}

/** A placement and, in the same bucket, the record of the worker that calls from it: what a caller token is checked against. */
export interface CallerPlacement {
  readonly placement: PlacementView | undefined
  /** Undefined when the bucket has no record of the worker, or its record no caller key. */
  readonly caller: { readonly incarnation: string; readonly callerKey: string } | undefined
}

export interface WorkerView {
  readonly worker: string
  readonly advertiseUrl: string
  readonly namespaces: ReadonlyArray<NamespaceRegistration>
  readonly headroom: number
  readonly leaseExpiresAt: number
  readonly draining: boolean
  readonly degraded: boolean
  readonly nacks: number
}

export const memberKey = (env: string, namespace: string): string => `${env}|${namespace}`
export const rowKey = (key: PlacementKey): string => `${key.env}|${key.namespace}|${key.id}`

/** A worker's refusal window, as its record and a membership view hold it (docs/registry-api.md "Nack window"). */
export type NackWindow = Pick<WorkerRecord, "nackWindowStart" | "nackCount">

/** A fixed window, opened by the first refusal after the last one closed. */
export const nackWindowOpen = (record: NackWindow, now: number, policy: RegistryPolicy): boolean =>
  now < record.nackWindowStart + policy.nackWindowMs

export const nacksInWindow = (record: NackWindow, now: number, policy: RegistryPolicy): number =>
  nackWindowOpen(record, now, policy) ? record.nackCount : 0

export const nackDegraded = (record: NackWindow, now: number, policy: RegistryPolicy): boolean =>
  nacksInWindow(record, now, policy) >= policy.nackThreshold

/** A worker record as the API shows it at `now`: degraded when it says so or by its nack window. */
export const workerViewOf = (record: WorkerShown, now: number, policy: RegistryPolicy): WorkerView => ({
  worker: record.worker,
  advertiseUrl: record.advertiseUrl,
  namespaces: record.namespaces,
  headroom: record.headroom,
  leaseExpiresAt: record.leaseExpiresAt,
  draining: record.draining,
  degraded: record.degraded || nackDegraded(record, now, policy),
  nacks: nacksInWindow(record, now, policy)
})

/** Lease a worker must have left to take a new placement (docs/protocol.md "Resolution"). */
export const minLeaseLeftMs = (leaseMs: number): number => Math.min(5000, leaseMs / 3)
