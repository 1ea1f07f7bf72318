// A resolve's outcome as the service answers it (docs/protocol.md "Resolution"): a placement, or
// the catalogue row of its refusal with the time it has left.
import { Effect } from "effect"
import { HostnameBindingDisplaced, NoLiveBackends, PlacementHeldByAnotherHostname, RegistryColdStart, TakeoverInProgress, UnknownNamespace } from "../Errors.js"
import type { ResolveOutcome } from "./Domain.js"
import type { Placement, ResolveRefusal } from "./Registry.js"

/** A pair rebound again while its resolve was being retried: the binding is moving; retry shortly. */
const REBOUND_RETRY_MS = 1000

/**
 * The time a refusal has left, at most one lease: a cold-start marker or a deadline may have been
 * stamped by a call whose `now` was read a moment after this query's, yet none outlasts one
 * lease from the registry's present.
 */
const timeLeftMs = (retryAfterMs: number, leaseMs: number): number => Math.min(retryAfterMs, leaseMs)

export const placedOrRefused = (outcome: ResolveOutcome, env: string, leaseMs: number): Effect.Effect<Placement, ResolveRefusal> => {
  switch (outcome._tag) {
    case "Placed":
      return Effect.succeed({ env, worker: outcome.worker, advertiseUrl: outcome.advertiseUrl, epoch: outcome.epoch, isNew: outcome.isNew })
    case "UnknownNamespace":
      return new UnknownNamespace()
    case "ColdStart":
      return new RegistryColdStart({ retryAfterMs: timeLeftMs(outcome.retryAfterMs, leaseMs) })
    case "NoLiveBackends":
      return new NoLiveBackends()
    case "TakeoverInProgress":
      return new TakeoverInProgress({ retryAfterMs: timeLeftMs(outcome.retryAfterMs, leaseMs) })
    case "HeldByAnotherHostname":
      return new PlacementHeldByAnotherHostname()
    case "Displaced":
      return new HostnameBindingDisplaced({ retryAfterMs: timeLeftMs(outcome.retryAfterMs, leaseMs) })
    case "Rebound":
      return new HostnameBindingDisplaced({ retryAfterMs: REBOUND_RETRY_MS })
  }
}
