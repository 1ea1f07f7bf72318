// A second, naive resolution (docs/protocol.md "Resolution"), written from the page's text
// for the model-based test to compare every resolve with. It shares no code with src/registry:
// it reads a bucket's recorded data (worker records, rows, bindings, cold-start marker, epoch
// counter) and derives the answer step by step, slowly and plainly. Membership comes from
// each worker record's own registrations, not from the model's member index.
import { createHash } from "node:crypto"
import type { Takeover } from "../../src/Config.js"
import type { PlacementRow, RegistryPolicy, ResolveOutcome, WorkerRecord } from "../../src/registry/Domain.js"
import type { BucketState } from "../../src/registry/BucketState.js"

export interface NaiveQuery {
  readonly env: string
  readonly namespace: string
  readonly id: string
  /** "" outside hostname-aware mode. */
  readonly hostname: string
  readonly takeover: Takeover
  readonly caller: string | undefined
  readonly affinity: string
  readonly excluded: ReadonlyArray<string>
  readonly r1: number
  readonly r2: number
}

/** What the page prescribes; a new placement's epoch is only bounded: above the bucket's counter. */
export type NaiveAnswer =
  | Exclude<ResolveOutcome, { readonly _tag: "Placed" }>
  | { readonly _tag: "Placed"; readonly worker: string; readonly advertiseUrl: string; readonly epoch: string; readonly isNew: false }
  | { readonly _tag: "Placed"; readonly worker: string; readonly advertiseUrl: string; readonly epochAbove: bigint; readonly isNew: true }

const registeredFor = (record: WorkerRecord, env: string, namespace: string, hostname: string): boolean =>
  record.namespaces.some((r) => r.env === env && r.namespace === namespace && (hostname === "" || r.hostname === hostname))

const ownerIsLive = (state: Readonly<BucketState>, row: PlacementRow, now: number): boolean => {
  const owner = state.workers.get(row.worker)
  return owner !== undefined && owner.incarnation === row.incarnation && owner.leaseExpiresAt > now
}

/** Self-reported, or `nackThreshold` refusals counted in a window that is still open. */
const isDegraded = (record: WorkerRecord, now: number, policy: RegistryPolicy): boolean =>
  record.degraded || (now < record.nackWindowStart + policy.nackWindowMs && record.nackCount >= policy.nackThreshold)

const sha1hex = (text: string): string => createHash("sha1").update(text, "utf8").digest("hex")

export const naiveResolve = (state: Readonly<BucketState>, now: number, query: NaiveQuery, policy: RegistryPolicy): NaiveAnswer => {
  const hostnameAware = query.hostname !== ""
  const firstUse = state.coldSince === undefined
  const binding = hostnameAware ? [...state.bindings].find(([key]) => key === `${query.hostname}\n${query.namespace}`)?.[1] : undefined
  // Step 1: the namespace was registered (in hostname-aware mode: the pair is bound, to this env).
  if (hostnameAware) {
    if (binding === undefined) return { _tag: "UnknownNamespace" }
    if (binding.env !== query.env) return { _tag: "Rebound", env: binding.env }
  } else if (![...state.namespaces].includes(`${query.env}|${query.namespace}`)) {
    return { _tag: "UnknownNamespace" }
  }
  // Step 2: a row whose placement has not ended is forwarded, or (another hostname's) held.
  const row = [...state.rows.values()].find((r) => r.env === query.env && r.namespace === query.namespace && r.id === query.id)
  const ended = row === undefined || (row.windDownAt !== 0 && row.windDownAt <= now) || !ownerIsLive(state, row, now)
  if (!ended) {
    const owner = state.workers.get(row.worker)!
    const onThisHostname = !hostnameAware || row.hostname === query.hostname || registeredFor(owner, query.env, query.namespace, query.hostname)
    if (!onThisHostname) {
      if (query.takeover === "deny") return { _tag: "HeldByAnotherHostname" }
      const deadline = row.windDownAt === 0 ? now + policy.leaseMs : row.windDownAt
      return { _tag: "TakeoverInProgress", retryAfterMs: deadline - now }
    }
    return { _tag: "Placed", worker: row.worker, advertiseUrl: owner.advertiseUrl, epoch: row.epoch, isNew: false }
  }
  // Step 3: a pair rebound to this env less than a lease ago places nothing new.
  if (binding !== undefined && binding.displacedUntil > now) return { _tag: "Displaced", retryAfterMs: binding.displacedUntil - now }
  // Step 4: cold start, from the marker (set now, when this is the bucket's first use).
  const marker = firstUse ? now : state.coldSince!
  if (now < marker + policy.leaseMs) return { _tag: "ColdStart", retryAfterMs: marker + policy.leaseMs - now }
  // Step 5: candidates, in worker id order.
  const minLeaseLeft = Math.min(5000, policy.leaseMs / 3)
  const candidates = [...state.workers.values()]
    .filter((w) => registeredFor(w, query.env, query.namespace, query.hostname))
    .filter((w) => w.leaseExpiresAt - now >= minLeaseLeft)
    .filter((w) => !w.draining && !isDegraded(w, now, policy))
    .filter((w) => !query.excluded.includes(w.worker))
    .sort((a, b) => (a.worker < b.worker ? -1 : 1))
  if (candidates.length === 0) return { _tag: "NoLiveBackends" }
  // Step 6: the caller's worker, else rendezvous; kept when its headroom is at least the mean over the balance factor.
  const mean = candidates.reduce((sum, w) => sum + w.headroom, 0) / candidates.length
  let preferred = candidates.find((w) => w.worker === query.caller)
  if (preferred === undefined) {
    preferred = candidates[0]!
    for (const w of candidates) if (sha1hex(`${query.affinity}\n${w.worker}`) > sha1hex(`${query.affinity}\n${preferred.worker}`)) preferred = w
  }
  let chosen = preferred
  if (preferred.headroom < mean / policy.balanceFactor) {
    const n = candidates.length
    const i = Math.floor(query.r1 * n)
    let j = Math.floor(query.r2 * (n - 1))
    if (j >= i) j += 1
    chosen = n === 1 ? candidates[0]! : candidates[j]!.headroom > candidates[i]!.headroom ? candidates[j]! : candidates[i]!
  }
  // Step 7: a new placement, with an epoch above every one the bucket minted.
  return { _tag: "Placed", worker: chosen.worker, advertiseUrl: chosen.advertiseUrl, epochAbove: state.epoch ?? 0n, isNew: true }
}
