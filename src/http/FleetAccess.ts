// Who may read `/fleet.json` (docs/operations.md "The fleet page"): with `credentials`, an
// operator credential (the deployment token or an operator key), as for every operator call of
// the registry API; without, anyone who reaches the metrics listener, as before. The page and
// its script hold no data and stay open.
import { Effect } from "effect"
import type { CredentialsService } from "../auth/Credentials.js"
import { type InvalidDeploymentToken, OperatorCredentialRequired } from "../Errors.js"

export type FleetAccess = (authorization: string | undefined) => Effect.Effect<void, InvalidDeploymentToken | OperatorCredentialRequired>

export const fleetAccess = (credentialsConfigured: boolean, credentials: CredentialsService): FleetAccess =>
  credentialsConfigured
    ? (authorization) =>
      Effect.flatMap(credentials.identify(authorization), (caller) => (caller._tag === "Operator" ? Effect.void : new OperatorCredentialRequired()))
    : () => Effect.void
