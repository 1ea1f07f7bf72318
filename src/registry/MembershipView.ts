// A membership view (docs/protocol.md "Cost at scale"): one bucket's worker records as Pinboard
// last read them, kept current from the bucket's change log, so that the ranking of DESIGN 5
// steps 5 and 6 runs here and the resolve script only checks the proposal. Plain data and pure
// functions; reading Redis is RedisView.ts's.
import type { NamespaceRegistration, RegistryPolicy, ResolveQuery } from "./Domain.js"
import { memberKey, nackDegraded } from "./Domain.js"
import { servesHostname } from "./Hostnames.js"
import { choosePlacement, type Candidate } from "./Placement.js"

/** What a view keeps of a worker record: everything a candidate test needs but the lease. */
export interface ViewRecord {
  readonly worker: string
  /** memberKey(env, namespace) of every registration. */
  readonly memberKeys: ReadonlyArray<string>
  readonly headroom: number
  readonly draining: boolean
  readonly degraded: boolean
  readonly nackWindowStart: number
  readonly nackCount: number
  readonly namespaces: ReadonlyArray<NamespaceRegistration>
}

export interface BucketView {
  /** The bucket's generation (its cold-start marker) the records belong to; "" before the first read. */
  gen: string
  /** The change log's sequence number the records are current to, as a decimal string. */
  seq: string
  readonly records: Map<string, ViewRecord>
  /** memberKey -> its workers in id order; rebuilt from the records after a membership change. */
  members: Map<string, ReadonlyArray<string>> | undefined
}

export const emptyView = (): BucketView => ({ gen: "", seq: "0", records: new Map(), members: undefined })

/** A record as the scripts send it (absent: the worker is gone). */
export type RecordUpdate = { readonly worker: string; readonly record: ViewRecord | undefined }

const sameMembership = (a: ViewRecord | undefined, b: ViewRecord | undefined): boolean =>
  a !== undefined && b !== undefined && a.memberKeys.length === b.memberKeys.length && a.memberKeys.every((k, i) => k === b.memberKeys[i])

export const applyUpdates = (view: BucketView, updates: ReadonlyArray<RecordUpdate>): void => {
  for (const { worker, record } of updates) {
    const before = view.records.get(worker)
    if (record === undefined) view.records.delete(worker)
    else view.records.set(worker, record)
    if (!sameMembership(before, record)) view.members = undefined
  }
}

/** Forgets everything: the bucket is another generation, or the log no longer reaches back. */
export const resetView = (view: BucketView, gen: string, seq: string): void => {
  view.gen = gen
  view.seq = seq
  view.records.clear()
  view.members = undefined
}

/** Sequence numbers as decimal strings without leading zeros. */
export const seqAfter = (a: string, b: string): boolean => a.length > b.length || (a.length === b.length && a > b)

const membersOf = (view: BucketView, key: string): ReadonlyArray<string> => {
  if (view.members === undefined) {
    const members = new Map<string, Array<string>>()
    for (const record of view.records.values()) {
      for (const k of record.memberKeys) {
        const list = members.get(k)
        if (list === undefined) members.set(k, [record.worker])
        else list.push(record.worker)
      }
    }
    for (const list of members.values()) list.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    view.members = members
  }
  return view.members.get(key) ?? []
}

/**
 * Step 5 over the view: the workers of the query's (env, namespace) that are candidates at `now`,
 * in worker id order. `short` names the workers whose lease left is below the minimum at `now`
 * (the resolve script reads them from its lease index with each answer).
 */
export const candidatesOf = (
  view: BucketView,
  query: ResolveQuery,
  now: number,
  short: ReadonlySet<string>,
  policy: RegistryPolicy
): Array<Candidate> => {
  const candidates: Array<Candidate> = []
  for (const worker of membersOf(view, memberKey(query.env, query.namespace))) {
    const record = view.records.get(worker)!
    if (
      short.has(worker) ||
      record.draining ||
      record.degraded ||
      nackDegraded(record, now, policy) ||
      query.excluded.includes(worker) ||
      (query.hostname !== "" && !servesHostname(record.namespaces, query.env, query.namespace, query.hostname))
    ) {
      continue
    }
    candidates.push({ worker, headroom: record.headroom })
  }
  return candidates
}

/** Step 6 over the view: the worker to propose, or "" when the view has no candidate. */
export const propose = (
  view: BucketView,
  query: ResolveQuery,
  now: number,
  short: ReadonlySet<string>,
  policy: RegistryPolicy
): string =>
  choosePlacement({
    candidates: candidatesOf(view, query, now, short, policy),
    caller: query.caller,
    affinity: query.affinity,
    balanceFactor: policy.balanceFactor,
    r1: query.r1,
    r2: query.r2
  }) ?? ""
