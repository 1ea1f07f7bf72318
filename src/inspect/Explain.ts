// What a resolve of one id would do now (docs/protocol.md "Resolution" steps 2, 5 and 6), worked out from what the
// registry API shows: the id's placement row and the membership of GET /registry/workers.
// Plain data in, plain data out; the choice itself is src/registry/Placement.ts's.
import { minLeaseLeftMs } from "../registry/Domain.js"
import { byWorkerId, type Candidate, choosePlacement, rendezvousScore } from "../registry/Placement.js"
import { type ListedWorker, type PlacementAnswer, servesNamespace } from "./Answers.js"

export interface ExplainInput {
  readonly env: string
  readonly namespace: string
  /** Hostname-aware mode: only workers registered for this hostname are candidates. */
  readonly hostname: string | undefined
  readonly placement: PlacementAnswer | undefined
  /** GET /registry/workers: bucket 0's copy of the membership. */
  readonly workers: ReadonlyArray<ListedWorker>
  /** This machine's clock, ms since the Unix epoch. */
  readonly now: number
  readonly leaseMs: number
  readonly balanceFactor: number
  readonly affinity: string
  readonly caller: string | undefined
}

/** Why a worker of the namespace is not a candidate (docs/protocol.md "Resolution" step 5). */
export type Exclusion = "lapsed" | "lease-short" | "draining" | "degraded"

export interface WorkerVerdict {
  readonly worker: string
  readonly headroom: number
  /** Negative once the lease has lapsed. */
  readonly leaseLeftMs: number
  /** Empty for a candidate. */
  readonly exclusions: ReadonlyArray<Exclusion>
  readonly rendezvousScore: string
}

export interface Odds {
  readonly worker: string
  readonly probability: number
}

export type PlacementOutcome =
  /** No listed worker serves the namespace: `404 unknown namespace` if it was never registered, else `503 no live backends`. */
  | { readonly _tag: "NoWorkers" }
  /** `503 no live backends for namespace`. */
  | { readonly _tag: "NoCandidates" }
  | {
    readonly _tag: "Chosen"
    readonly preferred: string
    readonly preferredBy: "caller" | "rendezvous"
    readonly preferredHeadroom: number
    readonly meanHeadroom: number
    readonly balanceFactor: number
    /** mean / balanceFactor: the preference holds at or above it. */
    readonly threshold: number
    readonly holds: boolean
    /** Where the placement goes: the preferred worker for sure, or the two-random-choices odds. */
    readonly odds: ReadonlyArray<Odds>
  }

export type CallerStatus = "candidate" | "not-candidate" | "not-listed"

export type ResolveExplanation =
  | { readonly _tag: "Forward"; readonly worker: string; readonly epoch: string }
  | {
    readonly _tag: "Place"
    /** The row that exists but has ended; a resolve deletes it first. */
    readonly ended: { readonly worker: string; readonly epoch: string; readonly reason: "owner-not-live" | "wind-down-passed" } | null
    readonly minLeaseLeftMs: number
    /** The workers of the namespace in this env (for the hostname, if given), ordered by worker id. */
    readonly workers: ReadonlyArray<WorkerVerdict>
    readonly affinity: string
    readonly caller: { readonly worker: string; readonly status: CallerStatus } | null
    readonly outcome: PlacementOutcome
  }

export const exclusionsOf = (worker: ListedWorker, now: number, leaseMs: number): ReadonlyArray<Exclusion> => {
  const exclusions: Array<Exclusion> = []
  const leaseLeft = worker.leaseExpiresAt - now
  if (leaseLeft <= 0) exclusions.push("lapsed")
  else if (leaseLeft < minLeaseLeftMs(leaseMs)) exclusions.push("lease-short")
  if (worker.draining) exclusions.push("draining")
  // The listing's `degraded` already includes nack-degraded (docs/registry-api.md "Nack window").
  if (worker.degraded) exclusions.push("degraded")
  return exclusions
}

export const explainResolve = (input: ExplainInput): ResolveExplanation => {
  const { placement } = input
  if (placement?.live === true) return { _tag: "Forward", worker: placement.worker, epoch: placement.epoch }
  const workers = input.workers
    .filter((w) => servesNamespace(w, input.env, input.namespace, input.hostname))
    .map((w): WorkerVerdict => ({
      worker: w.worker,
      headroom: w.headroom,
      leaseLeftMs: w.leaseExpiresAt - input.now,
      exclusions: exclusionsOf(w, input.now, input.leaseMs),
      rendezvousScore: rendezvousScore(input.affinity, w.worker)
    }))
    .sort(byWorkerId)
  const candidates: ReadonlyArray<Candidate> = workers.filter((w) => w.exclusions.length === 0)
  return {
    _tag: "Place",
    ended: placement === undefined
      ? null
      : {
        worker: placement.worker,
        epoch: placement.epoch,
        reason: placement.windDownAt !== null && placement.windDownAt <= input.now ? "wind-down-passed" : "owner-not-live"
      },
    minLeaseLeftMs: minLeaseLeftMs(input.leaseMs),
    workers,
    affinity: input.affinity,
    caller: input.caller === undefined
      ? null
      : {
        worker: input.caller,
        status: candidates.some((c) => c.worker === input.caller)
          ? "candidate"
          : workers.some((w) => w.worker === input.caller)
          ? "not-candidate"
          : "not-listed"
      },
    outcome: workers.length === 0
      ? { _tag: "NoWorkers" }
      : candidates.length === 0
      ? { _tag: "NoCandidates" }
      : chosen(candidates, input)
  }
}

const chosen = (candidates: ReadonlyArray<Candidate>, input: ExplainInput): PlacementOutcome => {
  const byCaller = candidates.find((c) => c.worker === input.caller)
  const preferred = byCaller ?? candidates.reduce((best, c) =>
    rendezvousScore(input.affinity, c.worker) > rendezvousScore(input.affinity, best.worker) ? c : best
  )
  const meanHeadroom = candidates.reduce((sum, c) => sum + c.headroom, 0) / candidates.length
  const threshold = meanHeadroom / input.balanceFactor
  return {
    _tag: "Chosen",
    preferred: preferred.worker,
    preferredBy: byCaller === undefined ? "rendezvous" : "caller",
    preferredHeadroom: preferred.headroom,
    meanHeadroom,
    balanceFactor: input.balanceFactor,
    threshold,
    holds: preferred.headroom >= threshold,
    odds: placementOdds(candidates, preferred.worker, input.balanceFactor)
  }
}

/**
 * The chance of each candidate, from Placement.ts's own choice run once per cell of (r1, r2):
 * i = floor(r1 n) and j = floor(r2 (n - 1)) take each value on equal shares of [0, 1), so one
 * r at the middle of each share covers every draw. Passing the preferred worker as the caller
 * makes the preference step pick it without hashing; the rest of the choice is unchanged.
 */
export const placementOdds = (
  candidates: ReadonlyArray<Candidate>,
  preferred: string,
  balanceFactor: number
): ReadonlyArray<Odds> => {
  const n = candidates.length
  const shares = Math.max(1, n - 1)
  const counts = new Map<string, number>()
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < shares; j++) {
      const worker = choosePlacement({
        candidates,
        caller: preferred,
        affinity: "",
        balanceFactor,
        r1: (i + 0.5) / n,
        r2: (j + 0.5) / shares
      })
      if (worker !== undefined) counts.set(worker, (counts.get(worker) ?? 0) + 1)
    }
  }
  return candidates
    .filter((c) => counts.has(c.worker))
    .map((c) => ({ worker: c.worker, probability: counts.get(c.worker)! / (n * shares) }))
}
