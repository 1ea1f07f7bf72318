// Step 2, attestation (docs/config.md, docs/deploy.md "Credentials"): a `Pinboard-Caller` token
// makes the request a call from an instance. Its signature and claims are verified, then the
// registry must still place the calling instance at that epoch on that worker. With attestation
// keys the token is signed with its incarnation's own key: the registry read that finds the
// placement also finds that key, so one call does both.
import type { IncomingHttpHeaders } from "node:http"
import { Effect } from "effect"
import { CALLER_HEADER } from "../../contract/Headers.js"
import type { AuthService } from "../../auth/Auth.js"
import { type CallerClaims, namedSigner } from "../../auth/CallerToken.js"
import { InvalidAttestation, StaleAttestation, type AttestationExpired } from "../../Errors.js"
import type { PlacementView } from "../../registry/Domain.js"
import type { RegistryDown, RegistryService } from "../../registry/Registry.js"

export type AttestationError = InvalidAttestation | AttestationExpired | StaleAttestation | RegistryDown

const outside: Effect.Effect<CallerClaims | undefined> = Effect.succeed(undefined)

const placedAsClaimed = (view: PlacementView, claims: CallerClaims): boolean =>
  view.live && view.worker === claims.worker && view.epoch === claims.epoch

/** The caller's placement must be live, on the token's worker, at the token's epoch. */
const stillPlaced = (registry: RegistryService, claims: CallerClaims): Effect.Effect<CallerClaims, StaleAttestation | RegistryDown> =>
  registry.placement({ env: claims.env, namespace: claims.namespace, id: claims.id }).pipe(
    Effect.catchTag("NotPlaced", () => new StaleAttestation()),
    Effect.flatMap((view) => (placedAsClaimed(view, claims) ? Effect.succeed(claims) : new StaleAttestation()))
  )

/** A token without a key to check it by (no such incarnation on that worker) is as forged. */
const signedByItsIncarnation = (auth: AuthService, registry: RegistryService, token: string): Effect.Effect<CallerClaims, AttestationError> => {
  const signer = namedSigner(token)
  if (signer === undefined) return new InvalidAttestation()
  return Effect.flatMap(registry.callerPlacement({ env: signer.env, namespace: signer.namespace, id: signer.id }, signer.worker), ({ placement, caller }) =>
    caller === undefined || caller.incarnation !== signer.incarnation
      ? new InvalidAttestation()
      : Effect.flatMap(auth.verifyCaller(token, Buffer.from(caller.callerKey, "base64url")), (claims) =>
        placement !== undefined && placement.incarnation === signer.incarnation && placedAsClaimed(placement, claims)
          ? Effect.succeed(claims)
          : new StaleAttestation()
      )
  )
}

export const readCaller = (
  auth: AuthService,
  registry: RegistryService,
  headers: IncomingHttpHeaders
): Effect.Effect<CallerClaims | undefined, AttestationError> => {
  const token = headers[CALLER_HEADER]
  if (token === undefined) return outside
  if (typeof token !== "string") return new InvalidAttestation()
  return auth.callerKeys._tag === "DeploymentToken"
    ? Effect.flatMap(auth.verifyCaller(token, auth.callerKeys.key), (claims) => stillPlaced(registry, claims))
    : signedByItsIncarnation(auth, registry, token)
}
