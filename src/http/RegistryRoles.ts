// What each role may do on the registry API (docs/registry-api.md "Authentication"): an
// operator anything; a worker credential what its entry grants (auth/WorkerGrant.ts). Each
// check answers before the registry is touched; the owner of a row to release or tag is the
// script's to check, in the same call as the compare-and-set.
import { Effect } from "effect"
import type { RegistryCaller } from "../auth/Credentials.js"
import { coversPlacement, coversRegistration } from "../auth/WorkerGrant.js"
import { CredentialDoesNotCoverNamespace, CredentialDoesNotCoverWorker, OperatorCredentialRequired } from "../Errors.js"
import { type NamespaceRegistration, type OwnerGrant, ownerGrantCovers, type PlacementKey } from "../registry/Domain.js"

/** Listing the workers and reading placements. */
export const operatorOnly = (caller: RegistryCaller) => (caller._tag === "Operator" ? Effect.void : new OperatorCredentialRequired())

/** Registering and heartbeating as `worker`. */
export const mayActAs = (caller: RegistryCaller, worker: string) =>
  caller._tag === "Operator" || ownerGrantCovers(caller.grant.owners, worker) ? Effect.void : new CredentialDoesNotCoverWorker()

export const mayRegister = (caller: RegistryCaller, registrations: ReadonlyArray<NamespaceRegistration>) =>
  caller._tag === "Operator" || registrations.every((registration) => coversRegistration(caller.grant, registration))
    ? Effect.void
    : new CredentialDoesNotCoverNamespace()

/** Another worker's deregistration is an operator's call. */
export const mayDeregister = (caller: RegistryCaller, worker: string) =>
  caller._tag === "Operator" || ownerGrantCovers(caller.grant.owners, worker) ? Effect.void : new OperatorCredentialRequired()

/** The owners a release or tag may touch: any for an operator; for a worker credential, its ids, in its namespaces. */
export const ownersFor = (caller: RegistryCaller, key: PlacementKey): Effect.Effect<OwnerGrant | undefined, CredentialDoesNotCoverNamespace> =>
  caller._tag === "Operator"
    ? Effect.succeed(undefined)
    : coversPlacement(caller.grant, key)
      ? Effect.succeed(caller.grant.owners)
      : new CredentialDoesNotCoverNamespace()
