// Step 7, resolve (routing.md "Resolution"): the one atomic resolve of the request, and
// when it answered, for the re-resolve rule of "Retries Pinboard makes".
import { Effect } from "effect"
import type { NoLiveBackends, RegistryColdStart, RegistryUnavailable, UnknownNamespace } from "../../Errors.js"
import { Registry, type Placement, type ResolveRequest } from "../../registry/Registry.js"

export interface Resolved {
  readonly placement: Placement
  /** Clock time of the answer. */
  readonly resolvedAt: number
}

export type ResolveError = UnknownNamespace | RegistryColdStart | NoLiveBackends | RegistryUnavailable

export const resolvePlacement = (request: ResolveRequest): Effect.Effect<Resolved, ResolveError, Registry> =>
  Effect.flatMap(Registry, (registry) =>
    Effect.flatMap(registry.resolve(request), (placement) =>
      Effect.clockWith((clock) => Effect.succeed({ placement, resolvedAt: clock.unsafeCurrentTimeMillis() }))
    )
  )
