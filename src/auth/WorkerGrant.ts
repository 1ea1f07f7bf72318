// What a worker credential may do (docs/deploy.md "Credentials"), as plain functions: the worker
// ids and namespaces its entries grant, and whether a registration or a placement falls inside
// them (a worker id: registry/Domain.ts ownerGrantCovers, the test the scripts make). The
// registry API asks before it touches the registry.
import { SUBJECT_PLACEHOLDER } from "../config/Credentials.js"
import type { NamespaceRegistration, OwnerGrant, PlacementKey } from "../registry/Domain.js"
import type { NamespaceGrant } from "../config/CredentialSet.js"

export interface WorkerGrant {
  readonly owners: OwnerGrant
  readonly namespaces: ReadonlyArray<NamespaceGrant>
}

interface GrantedEntry {
  readonly workers: ReadonlyArray<string>
  readonly namespaces: ReadonlyArray<NamespaceGrant>
}

/**
 * The union of `entries`' grants, `{sub}` replaced by `subject` (a pattern naming `{sub}` grants
 * nothing to a token without one).
 */
export const grantOf = (entries: ReadonlyArray<GrantedEntry>, subject: string | undefined): WorkerGrant => {
  const exact: Array<string> = []
  const prefixes: Array<string> = []
  for (const entry of entries) {
    for (const pattern of entry.workers) {
      if (subject === undefined && pattern.includes(SUBJECT_PLACEHOLDER)) continue
      const resolved = subject === undefined ? pattern : pattern.replaceAll(SUBJECT_PLACEHOLDER, subject)
      if (resolved.endsWith("*")) prefixes.push(resolved.slice(0, -1))
      else exact.push(resolved)
    }
  }
  return { owners: { exact, prefixes }, namespaces: entries.flatMap((entry) => entry.namespaces) }
}

/** A registration (hostname "" outside hostname-aware mode) inside a granted namespace, env and hostname. */
export const coversRegistration = (grant: WorkerGrant, registration: NamespaceRegistration): boolean =>
  grant.namespaces.some(
    (granted) =>
      granted.namespace === registration.namespace &&
      granted.env === registration.env &&
      (granted.hostname === "*" || granted.hostname === registration.hostname)
  )

/** A placement's namespace and env inside the grant, whichever hostname. */
export const coversPlacement = (grant: WorkerGrant, key: PlacementKey): boolean =>
  grant.namespaces.some((granted) => granted.namespace === key.namespace && granted.env === key.env)
