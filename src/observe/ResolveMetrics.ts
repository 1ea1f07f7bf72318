// Resolves timed and counted by outcome (docs/operations.md, `pinboard_resolve_duration_seconds`): a
// decorator of the registry's `resolve`. Structural, so the registry applies it without
// observe/ knowing the registry's types.
import { Effect } from "effect"
import type { MetricsService, ResolveOutcomeLabel } from "./Metrics.js"

type RefusalTag =
  | "UnknownNamespace"
  | "RegistryColdStart"
  | "NoLiveBackends"
  | "RegistryUnavailable"
  | "ClockOffsetTooLarge"
  | "TakeoverInProgress"
  | "PlacementHeldByAnotherHostname"
  | "HostnameBindingDisplaced"

const REFUSED: Record<RefusalTag, ResolveOutcomeLabel> = {
  UnknownNamespace: "unknown_namespace",
  RegistryColdStart: "cold_start",
  NoLiveBackends: "no_live_backends",
  RegistryUnavailable: "unavailable",
  ClockOffsetTooLarge: "clock_offset",
  TakeoverInProgress: "takeover",
  PlacementHeldByAnotherHostname: "held_by_another_hostname",
  HostnameBindingDisplaced: "displaced"
}

/** What the decorator reads of a resolve: its namespace, whether it excluded a refuser, the placement's novelty. */
interface ResolveFacts {
  readonly namespace: string
  readonly excluded: ReadonlyArray<string>
}

/** A decorator of the registry's `resolve` (Metrics.ts's `meterResolve`). */
export type MeterResolve = <Request extends ResolveFacts, Placement extends { readonly isNew: boolean }, Refusal extends { readonly _tag: RefusalTag }>(
  resolve: (request: Request) => Effect.Effect<Placement, Refusal>
) => (request: Request) => Effect.Effect<Placement, Refusal>

/** `resolve`, timed and counted by `metrics`. */
export const meteredResolve = <Request extends ResolveFacts, Placement extends { readonly isNew: boolean }, Refusal extends { readonly _tag: RefusalTag }>(
  resolve: (request: Request) => Effect.Effect<Placement, Refusal>,
  metrics: Pick<MetricsService, "resolve">
): ((request: Request) => Effect.Effect<Placement, Refusal>) => {
  const outcomeOf = (request: Request, placement: Placement): ResolveOutcomeLabel =>
    !placement.isNew ? "forwarded" : request.excluded.length > 0 ? "re_placed" : "placed"
  return (request) =>
    Effect.suspend(() => {
      const started = performance.now()
      const seconds = () => (performance.now() - started) / 1000
      // One match for both ends (Effect 4 has no tapBoth): counted, then handed on as it was.
      return Effect.matchEffect(resolve(request), {
        onSuccess: (placement) => {
          metrics.resolve(request.namespace, outcomeOf(request, placement), seconds())
          return Effect.succeed(placement)
        },
        onFailure: (error) => {
          metrics.resolve(request.namespace, REFUSED[error._tag], seconds())
          return Effect.fail(error)
        }
      })
    })
}
