// The reference semantics of one bucket (docs/protocol.md "Resolution", docs/registry-api.md
// "Lease lifecycle" to "Ended rows and the sweep"): deterministic, no I/O, no clock, no
// randomness; `now` and the random numbers are arguments. The embedded registry runs it
// directly; the Lua scripts implement the same operations on Redis. What a bucket holds, and
// the bookkeeping every operation shares, are in BucketState.ts.
import {
  memberKey,
  nackWindowOpen,
  ownerGrantCovers,
  rowKey,
  workerViewOf,
  type BucketHeartbeat,
  type CallerPlacement,
  type CasOutcome,
  type OwnerGrant,
  type PlacementKey,
  type PlacementRow,
  type PlacementView,
  type RegisterOutcome,
  type RegistryPolicy,
  type ResolveOutcome,
  type ResolveQuery,
  type WindDownDue,
  type WindDownOutcome,
  type WorkerHeartbeat,
  type WorkerRegistration,
  type WorkerView
} from "./Domain.js"
import { deleteRow, deleteRowsOf, isLive, leaveMemberships, nextEpoch, removeWorker, touch, type BucketState } from "./BucketState.js"
import { bindingKey, decideBindings, decideHeld, displacementLeftMs, servesHostname } from "./Hostnames.js"
import { byWorkerId, choosePlacement, isPlaceable } from "./Placement.js"

export const register = (state: BucketState, now: number, reg: WorkerRegistration, policy: RegistryPolicy): RegisterOutcome => {
  touch(state, now)
  const binding = decideBindings(state.bindings, reg.namespaces, reg.epoch ?? "0", now, policy.leaseMs)
  if (binding._tag === "Conflict") return { _tag: "BindingConflict" }
  for (const [key, bound] of binding.updates) state.bindings.set(key, bound)
  const previous = state.workers.get(reg.worker)
  if (previous !== undefined) {
    // A new incarnation: whatever the old one held is no longer live.
    leaveMemberships(state, previous)
    deleteRowsOf(state, reg.worker)
  }
  state.workers.set(reg.worker, {
    worker: reg.worker,
    advertiseUrl: reg.advertiseUrl,
    incarnation: reg.incarnation,
    namespaces: reg.namespaces,
    leaseExpiresAt: now + policy.leaseMs,
    headroom: reg.headroom,
    draining: reg.draining,
    degraded: false,
    nackWindowStart: previous?.nackWindowStart ?? 0,
    nackCount: previous?.nackCount ?? 0,
    callerKey: reg.callerKey
  })
  for (const entry of reg.namespaces) {
    const key = memberKey(entry.env, entry.namespace)
    state.namespaces.add(key)
    const members = state.members.get(key) ?? new Set<string>()
    members.add(reg.worker)
    state.members.set(key, members)
  }
  return { _tag: "Registered" }
}

export const heartbeat = (
  state: BucketState,
  now: number,
  beat: WorkerHeartbeat,
  policy: RegistryPolicy
): BucketHeartbeat => {
  touch(state, now)
  const record = state.workers.get(beat.worker)
  if (record === undefined || record.incarnation !== beat.incarnation || record.leaseExpiresAt <= now) {
    return { _tag: "LeaseLost" }
  }
  state.workers.set(beat.worker, {
    ...record,
    leaseExpiresAt: now + policy.leaseMs,
    headroom: beat.headroom,
    draining: beat.draining,
    degraded: beat.degraded
  })
  const windDown: Array<WindDownDue> = []
  for (const key of state.rowsByWorker.get(beat.worker) ?? []) {
    const row = state.rows.get(key)!
    if (row.windDownAt > now) {
      windDown.push({ env: row.env, namespace: row.namespace, id: row.id, epoch: row.epoch, deadline: row.windDownAt })
    }
  }
  return { _tag: "Renewed", windDown }
}

export const deregister = (state: BucketState, worker: string, incarnation: string): void => {
  const record = state.workers.get(worker)
  if (record !== undefined && record.incarnation === incarnation) removeWorker(state, record)
}

/** Counts a refusal in the worker's fixed nack window (docs/registry-api.md). */
export const nack = (state: BucketState, now: number, worker: string, policy: RegistryPolicy): void => {
  const record = state.workers.get(worker)
  if (record === undefined) return
  const windowOpen = nackWindowOpen(record, now, policy)
  state.workers.set(worker, {
    ...record,
    nackWindowStart: windowOpen ? record.nackWindowStart : now,
    nackCount: windowOpen ? record.nackCount + 1 : 1
  })
}

/** Removes lapsed workers with their rows and rows past their wind-down deadline (docs/protocol.md). */
export const sweep = (state: BucketState, now: number): void => {
  for (const record of [...state.workers.values()]) {
    if (record.leaseExpiresAt <= now) removeWorker(state, record)
  }
  for (const row of [...state.rows.values()]) {
    if (row.windDownAt !== 0 && row.windDownAt <= now) deleteRow(state, row)
  }
}

export const resolve = (
  state: BucketState,
  now: number,
  query: ResolveQuery,
  policy: RegistryPolicy
): ResolveOutcome => {
  touch(state, now)
  const hostnameAware = query.hostname !== ""
  const members = memberKey(query.env, query.namespace)
  // Step 1: outside hostname-aware mode the namespace must be known; in it, the pair bound to the query's env.
  const binding = hostnameAware ? state.bindings.get(bindingKey(query.hostname, query.namespace)) : undefined
  if (hostnameAware) {
    if (binding === undefined) return { _tag: "UnknownNamespace" }
    if (binding.env !== query.env) return { _tag: "Rebound", env: binding.env }
  } else if (!state.namespaces.has(members)) {
    return { _tag: "UnknownNamespace" }
  }
  // Step 2: a live row is forwarded (through another hostname: the env's takeover decides).
  const key = rowKey(query)
  const existing = state.rows.get(key)
  if (existing !== undefined) {
    if (isLive(state, existing, now)) {
      const owner = state.workers.get(existing.worker)!
      // Placed through this hostname: its owner (this incarnation) is registered for it.
      const ownerServes =
        existing.hostname === query.hostname || servesHostname(owner.namespaces, query.env, query.namespace, query.hostname)
      const held = decideHeld(existing, ownerServes, query.takeover, now, policy.leaseMs)
      if (held._tag === "Deny") return { _tag: "HeldByAnotherHostname" }
      if (held._tag === "WindingDown") {
        state.rows.set(key, { ...existing, windDownAt: held.deadline })
        return { _tag: "TakeoverInProgress", retryAfterMs: held.deadline - now }
      }
      return { _tag: "Placed", worker: existing.worker, advertiseUrl: owner.advertiseUrl, epoch: existing.epoch, isNew: false }
    }
    deleteRow(state, existing)
  }
  // Step 3: new ids of a pair rebound to this env wait one lease.
  const displacedMs = binding === undefined ? 0 : displacementLeftMs(binding, now)
  if (displacedMs > 0) return { _tag: "Displaced", retryAfterMs: displacedMs }
  const coldUntil = state.coldSince! + policy.leaseMs
  if (now < coldUntil) return { _tag: "ColdStart", retryAfterMs: coldUntil - now }
  const candidates = [...(state.members.get(members) ?? [])]
    .map((worker) => state.workers.get(worker)!)
    .filter((record) => !hostnameAware || servesHostname(record.namespaces, query.env, query.namespace, query.hostname))
    .filter((record) => isPlaceable(record, now, policy, query.excluded))
    .map((record) => ({ worker: record.worker, headroom: record.headroom }))
    .sort(byWorkerId)
  const chosen = choosePlacement({
    candidates,
    caller: query.caller,
    affinity: query.affinity,
    balanceFactor: policy.balanceFactor,
    r1: query.r1,
    r2: query.r2
  })
  if (chosen === undefined) return { _tag: "NoLiveBackends" }
  const owner = state.workers.get(chosen)!
  state.epoch = nextEpoch(state.epoch!, now)
  const row: PlacementRow = {
    env: query.env,
    namespace: query.namespace,
    id: query.id,
    worker: chosen,
    incarnation: owner.incarnation,
    epoch: state.epoch.toString(),
    placedAt: now,
    hostname: query.hostname,
    tag: "",
    windDownAt: 0
  }
  state.rows.set(key, row)
  const owned = state.rowsByWorker.get(chosen) ?? new Set<string>()
  owned.add(key)
  state.rowsByWorker.set(chosen, owned)
  return { _tag: "Placed", worker: chosen, advertiseUrl: owner.advertiseUrl, epoch: row.epoch, isNew: true }
}

/**
 * Whether `owners` (a worker credential's grant, when the call has one) leave the row to another
 * worker: judged before the epoch, so that the answer tells no other worker's epoch.
 */
const heldByAnother = (row: PlacementRow | undefined, owners: OwnerGrant | undefined): boolean =>
  row !== undefined && owners !== undefined && !ownerGrantCovers(owners, row.worker)

/** Compare-and-delete at the given epoch (docs/registry-api.md "Release: POST /registry/release"). */
export const release = (state: BucketState, now: number, key: PlacementKey, epoch: string, owners?: OwnerGrant): CasOutcome => {
  touch(state, now)
  const row = state.rows.get(rowKey(key))
  if (heldByAnother(row, owners)) return { _tag: "HeldByAnotherWorker" }
  if (row === undefined || row.epoch !== epoch) return { _tag: "Conflict", current: row?.epoch ?? null }
  deleteRow(state, row)
  return { _tag: "Done" }
}

/** Compare-and-set of the owner tag at the given epoch (docs/registry-api.md "Tag: POST /registry/tag"). */
export const tag = (state: BucketState, now: number, key: PlacementKey, epoch: string, value: string, owners?: OwnerGrant): CasOutcome => {
  touch(state, now)
  const row = state.rows.get(rowKey(key))
  if (heldByAnother(row, owners)) return { _tag: "HeldByAnotherWorker" }
  if (row === undefined || row.epoch !== epoch) return { _tag: "Conflict", current: row?.epoch ?? null }
  state.rows.set(rowKey(key), { ...row, tag: value })
  return { _tag: "Done" }
}

/** Gives the placement at `epoch` a deadline one lease away, unless it has one already. */
export const beginWindDown = (
  state: BucketState,
  now: number,
  key: PlacementKey,
  epoch: string,
  policy: RegistryPolicy
): WindDownOutcome => {
  touch(state, now)
  const row = state.rows.get(rowKey(key))
  if (row === undefined || row.epoch !== epoch) return { _tag: "Conflict", current: row?.epoch ?? null }
  if (row.windDownAt !== 0) return { _tag: "WindingDown", deadline: row.windDownAt }
  const deadline = now + policy.leaseMs
  state.rows.set(rowKey(key), { ...row, windDownAt: deadline })
  return { _tag: "WindingDown", deadline }
}

export const placement = (state: BucketState, now: number, key: PlacementKey): PlacementView | undefined => {
  const row = state.rows.get(rowKey(key))
  if (row === undefined) return undefined
  return { ...row, advertiseUrl: state.workers.get(row.worker)?.advertiseUrl ?? null, live: isLive(state, row, now) }
}

/** The row as `placement` reads it, and `worker`'s incarnation and caller key in this bucket (what a caller token is checked against). */
export const callerPlacement = (state: BucketState, now: number, key: PlacementKey, worker: string): CallerPlacement => {
  const record = state.workers.get(worker)
  return {
    placement: placement(state, now, key),
    caller: record?.callerKey === undefined ? undefined : { incarnation: record.incarnation, callerKey: record.callerKey }
  }
}

export const workers = (state: BucketState, now: number, policy: RegistryPolicy): ReadonlyArray<WorkerView> =>
  [...state.workers.values()]
    .sort((a, b) => (a.worker < b.worker ? -1 : 1))
    .map((record) => workerViewOf(record, now, policy))

/** How many placement rows name each worker (its current incarnation's; ended ones until swept). */
export const placementsHeld = (state: BucketState, workers: ReadonlyArray<string>): ReadonlyArray<number> =>
  workers.map((worker) => state.rowsByWorker.get(worker)?.size ?? 0)
