// Placement policy (docs/protocol.md "Resolution" steps 5 and 6) as plain functions: the
// embedded registry ranks with them, and so does a Redis registry's membership view
// (MembershipView.ts), whose proposal resolve.lua checks against step 5 at `now`; the
// model-based tests hold the two layers to each other.
import { hash } from "node:crypto"
import { minLeaseLeftMs, nackDegraded, type RegistryPolicy, type WorkerRecord } from "./Domain.js"

export interface Candidate {
  readonly worker: string
  readonly headroom: number
}

export const isPlaceable = (
  record: WorkerRecord,
  now: number,
  policy: RegistryPolicy,
  excluded: ReadonlyArray<string>
): boolean =>
  record.leaseExpiresAt - now >= minLeaseLeftMs(policy.leaseMs) &&
  !record.draining &&
  !record.degraded &&
  !nackDegraded(record, now, policy) &&
  !excluded.includes(record.worker)

/** Ordered by worker id, byte order (worker ids are ASCII). */
export const byWorkerId = (a: Candidate, b: Candidate): number => (a.worker < b.worker ? -1 : a.worker > b.worker ? 1 : 0)

export const rendezvousScore = (affinity: string, worker: string): string => hash("sha1", `${affinity}\n${worker}`, "hex")

export interface PlacementChoice {
  /** Candidates ordered by worker id. */
  readonly candidates: ReadonlyArray<Candidate>
  readonly caller: string | undefined
  readonly affinity: string
  readonly balanceFactor: number
  readonly r1: number
  readonly r2: number
}

/** The candidate with the greatest rendezvous score on the affinity value (the first in id order on a tie). */
export const rendezvousPick = (candidates: ReadonlyArray<Candidate>, affinity: string): Candidate => {
  let best = candidates[0]!
  let bestScore = rendezvousScore(affinity, best.worker)
  for (let i = 1; i < candidates.length; i++) {
    const score = rendezvousScore(affinity, candidates[i]!.worker)
    if (score > bestScore) {
      best = candidates[i]!
      bestScore = score
    }
  }
  return best
}

const twoRandom = (choice: PlacementChoice): Candidate => {
  const n = choice.candidates.length
  if (n === 1) return choice.candidates[0]!
  const i = Math.floor(choice.r1 * n)
  let j = Math.floor(choice.r2 * (n - 1))
  if (j >= i) j += 1
  const first = choice.candidates[i]!
  const second = choice.candidates[j]!
  return second.headroom > first.headroom ? second : first
}

/**
 * The worker a new placement goes to; undefined when there are no candidates. `rendezvous` may
 * stand in for rendezvousPick when it answers the same (a membership view's cached ranking).
 */
export const choosePlacement = (
  choice: PlacementChoice,
  rendezvous: (candidates: ReadonlyArray<Candidate>, affinity: string) => Candidate = rendezvousPick
): string | undefined => {
  if (choice.candidates.length === 0) return undefined
  let sum = 0
  for (const candidate of choice.candidates) sum += candidate.headroom
  const mean = sum / choice.candidates.length
  const pick = choice.candidates.find((c) => c.worker === choice.caller) ?? rendezvous(choice.candidates, choice.affinity)
  return pick.headroom >= mean / choice.balanceFactor ? pick.worker : twoRandom(choice).worker
}
