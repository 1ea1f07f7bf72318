// A membership view (docs/protocol.md "Cost at scale"): one bucket's worker records as Pinboard
// last read them, kept current from the bucket's change log, so that the ranking of docs/protocol.md "Resolution"
// steps 5 and 6 runs here and the resolve script only checks the proposal. Plain data and pure
// functions; reading Redis is RedisView.ts's.
import { hash } from "node:crypto"
import type { NamespaceRegistration, RegistryPolicy, ResolveQuery } from "./Domain.js"
import { memberKey, nackDegraded } from "./Domain.js"
import { servesHostname } from "./Hostnames.js"
import { choosePlacement, rendezvousPick, rendezvousScore, type Candidate } from "./Placement.js"

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

/** Workers kept per ranking, and rankings kept in all. */
const RANKED = 8
const RANKINGS = 16_384

/**
 * The first RANKED workers of a members list in rendezvous order, for recent affinity values:
 * the best candidate is then the first of them that is a candidate, without hashing every
 * worker again. Keyed by the list's content, so every bucket's view of one membership shares
 * them; a membership change makes a new list, and so new rankings.
 */
const rankings = new Map<string, ReadonlyArray<string>>()
const signatures = new WeakMap<ReadonlyArray<string>, string>()

const signatureOf = (members: ReadonlyArray<string>): string => {
  let signature = signatures.get(members)
  if (signature === undefined) {
    signature = hash("sha1", members.join("\n"), "hex")
    signatures.set(members, signature)
  }
  return signature
}

const rankingOf = (members: ReadonlyArray<string>, affinity: string): ReadonlyArray<string> => {
  const key = `${signatureOf(members)}\n${affinity}`
  const known = rankings.get(key)
  if (known !== undefined) {
    rankings.delete(key)
    rankings.set(key, known)
    return known
  }
  // Greatest score first; members come in id order, so on a tie the first in id order stays ahead, as in rendezvousPick.
  const top: Array<{ readonly worker: string; readonly score: string }> = []
  for (const worker of members) {
    const score = rendezvousScore(affinity, worker)
    if (top.length === RANKED && score <= top[RANKED - 1]!.score) continue
    let at = top.length
    while (at > 0 && score > top[at - 1]!.score) at--
    top.splice(at, 0, { worker, score })
    if (top.length > RANKED) top.pop()
  }
  const ranking = top.map((entry) => entry.worker)
  if (rankings.size >= RANKINGS) rankings.delete(rankings.keys().next().value!)
  rankings.set(key, ranking)
  return ranking
}

/** The candidate of that worker, found by bisection: candidates come in worker id order. */
const inIdOrder = (candidates: ReadonlyArray<Candidate>, worker: string): Candidate | undefined => {
  let low = 0
  let high = candidates.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (candidates[middle]!.worker < worker) low = middle + 1
    else high = middle
  }
  return candidates[low]?.worker === worker ? candidates[low] : undefined
}

/** Step 6 over the view: the worker to propose, or "" when the view has no candidate. */
export const propose = (
  view: BucketView,
  query: ResolveQuery,
  now: number,
  short: ReadonlySet<string>,
  policy: RegistryPolicy
): string => {
  const members = membersOf(view, memberKey(query.env, query.namespace))
  const rendezvous = (candidates: ReadonlyArray<Candidate>, affinity: string): Candidate => {
    for (const worker of rankingOf(members, affinity)) {
      const candidate = inIdOrder(candidates, worker)
      if (candidate !== undefined) return candidate
    }
    return rendezvousPick(candidates, affinity)
  }
  return (
    choosePlacement(
      {
        candidates: candidatesOf(view, query, now, short, policy),
        caller: query.caller,
        affinity: query.affinity,
        balanceFactor: policy.balanceFactor,
        r1: query.r1,
        r2: query.r2
      },
      rendezvous
    ) ?? ""
  )
}
