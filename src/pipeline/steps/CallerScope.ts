// Step 6, caller scope (docs/config.md "Data-plane auth"): a credential must hold every scope of
// the rule; an attested caller's namespace must be among the rule's `callers`, when it has them.
import { Effect } from "effect"
import { admitsCaller, holdsScopes } from "../../auth/Rules.js"
import { InsufficientScope } from "../../Errors.js"
import type { CallerClaims } from "../../auth/CallerToken.js"
import type { Admission } from "./DataPlaneRule.js"

export const checkCallerScope = ({ rule, principal }: Admission, caller: CallerClaims | undefined): Effect.Effect<void, InsufficientScope> => {
  if (rule === undefined) return Effect.void
  const admitted =
    caller !== undefined
      ? admitsCaller(rule.callers, caller.namespace)
      : principal !== undefined
        ? holdsScopes(rule.scopes, principal.scopes)
        : rule.scopes.length === 0
  return admitted ? Effect.void : new InsufficientScope()
}
