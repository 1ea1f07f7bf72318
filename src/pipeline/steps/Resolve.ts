// Step 7, resolve (docs/protocol.md "Resolution"): the one atomic resolve of the request. Deliver.ts
// notes the monotonic time it was asked at, for the 5 s re-resolve of docs/proxy.md "Retries".
import type { Effect } from "effect"
import type { Placement, RegistryDown, RegistryService, ResolveRefusal, ResolveRequest } from "../../registry/Registry.js"

export type ResolveError = ResolveRefusal | RegistryDown

export const resolvePlacement = (registry: RegistryService, request: ResolveRequest): Effect.Effect<Placement, ResolveError> =>
  registry.resolve(request)
