// Step 2, attestation (docs/config.md): a `Pinboard-Caller` token makes the request a call from
// an instance. Its signature and claims are verified, then the registry must still place the
// calling instance at that epoch on that worker.
import type { IncomingHttpHeaders } from "node:http"
import { Effect } from "effect"
import { CALLER_HEADER } from "../../contract/Headers.js"
import type { AuthService } from "../../auth/Auth.js"
import type { CallerClaims } from "../../auth/CallerToken.js"
import { InvalidAttestation, StaleAttestation, type AttestationExpired } from "../../Errors.js"
import type { RegistryDown, RegistryService } from "../../registry/Registry.js"

export type AttestationError = InvalidAttestation | AttestationExpired | StaleAttestation | RegistryDown

const outside: Effect.Effect<CallerClaims | undefined> = Effect.succeed(undefined)

/** The caller's placement must be live, on the token's worker, at the token's epoch. */
const stillPlaced = (registry: RegistryService, claims: CallerClaims): Effect.Effect<CallerClaims, StaleAttestation | RegistryDown> =>
  registry.placement({ env: claims.env, namespace: claims.namespace, id: claims.id }).pipe(
    Effect.catchTag("NotPlaced", () => new StaleAttestation()),
    Effect.flatMap((view) =>
      view.live && view.worker === claims.worker && view.epoch === claims.epoch ? Effect.succeed(claims) : new StaleAttestation()
    )
  )

export const readCaller = (
  auth: AuthService,
  registry: RegistryService,
  headers: IncomingHttpHeaders
): Effect.Effect<CallerClaims | undefined, AttestationError> => {
  const token = headers[CALLER_HEADER]
  if (token === undefined) return outside
  if (typeof token !== "string") return new InvalidAttestation()
  return Effect.flatMap(auth.verifyCaller(token), (claims) => stillPlaced(registry, claims))
}
