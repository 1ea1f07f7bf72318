// What one bucket of the reference model holds (docs/protocol.md "Keys of one bucket"), and the
// bookkeeping its operations (Model.ts) share: the cold start and the epoch counter, a row's
// liveness, and the removal of rows, memberships and workers.
import { memberKey, rowKey, type PlacementRow, type WorkerRecord } from "./Domain.js"
import type { Binding } from "./Hostnames.js"

export interface BucketState {
  coldSince: number | undefined
  epoch: bigint | undefined
  /** memberKey(env, namespace) of every namespace ever registered. */
  readonly namespaces: Set<string>
  readonly workers: Map<string, WorkerRecord>
  /** memberKey(env, namespace) -> worker ids registered for it. */
  readonly members: Map<string, Set<string>>
  readonly rows: Map<string, PlacementRow>
  readonly rowsByWorker: Map<string, Set<string>>
  /** bindingKey(hostname, namespace) -> its env (hostname-aware mode, docs/proxy.md "Hostname-aware mode"). */
  readonly bindings: Map<string, Binding>
}

export const emptyBucket = (): BucketState => ({
  coldSince: undefined,
  epoch: undefined,
  namespaces: new Set(),
  workers: new Map(),
  members: new Map(),
  rows: new Map(),
  rowsByWorker: new Map(),
  bindings: new Map()
})

/** A bucket's first use starts its cold start and seeds its epoch counter (docs/protocol.md). */
export const touch = (state: BucketState, now: number): void => {
  if (state.coldSince === undefined) state.coldSince = now
  if (state.epoch === undefined) state.epoch = BigInt(now) * 1_000_000n
}

/**
 * One more than the last epoch, and never below `now` followed by six zeros: a Redis failover
 * can lose the counter's last increments, and the clock keeps the epochs increasing anyway.
 */
export const nextEpoch = (last: bigint, now: number): bigint => {
  const next = last + 1n
  const floor = BigInt(now) * 1_000_000n
  return next > floor ? next : floor
}

export const isLive = (state: BucketState, row: PlacementRow, now: number): boolean => {
  const owner = state.workers.get(row.worker)
  return (
    owner !== undefined &&
    owner.incarnation === row.incarnation &&
    owner.leaseExpiresAt > now &&
    (row.windDownAt === 0 || row.windDownAt > now)
  )
}

export const deleteRow = (state: BucketState, row: PlacementRow): void => {
  const key = rowKey(row)
  state.rows.delete(key)
  const owned = state.rowsByWorker.get(row.worker)
  owned?.delete(key)
  if (owned?.size === 0) state.rowsByWorker.delete(row.worker)
}

export const deleteRowsOf = (state: BucketState, worker: string): void => {
  for (const key of state.rowsByWorker.get(worker) ?? []) state.rows.delete(key)
  state.rowsByWorker.delete(worker)
}

export const leaveMemberships = (state: BucketState, record: WorkerRecord): void => {
  for (const entry of record.namespaces) {
    const key = memberKey(entry.env, entry.namespace)
    const members = state.members.get(key)
    members?.delete(record.worker)
    if (members?.size === 0) state.members.delete(key)
  }
}

export const removeWorker = (state: BucketState, record: WorkerRecord): void => {
  leaveMemberships(state, record)
  deleteRowsOf(state, record.worker)
  state.workers.delete(record.worker)
}
