// Step 7, resolve (routing.md "Resolution"): the one atomic resolve of the request, and the
// time it was made, for the re-resolve rule of "Retries Pinboard makes".
import { Effect } from "effect"
import type { RegistryUnavailable } from "../../Errors.js"
import { Registry, type Placement, type ResolveRefusal, type ResolveRequest } from "../../registry/Registry.js"

export interface Resolved {
  readonly placement: Placement
  /** Clock time when the resolve was asked: the registry's answer is as of then, or later. */
  readonly resolvedAt: number
}

export type ResolveError = ResolveRefusal | RegistryUnavailable

export const resolvePlacement = (request: ResolveRequest): Effect.Effect<Resolved, ResolveError, Registry> =>
  Effect.flatMap(Registry, (registry) =>
    Effect.clockWith((clock) => {
      const resolvedAt = clock.unsafeCurrentTimeMillis()
      return Effect.map(registry.resolve(request), (placement) => ({ placement, resolvedAt }))
    })
  )
