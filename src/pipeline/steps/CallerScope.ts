// Step 6, caller scope (DESIGN 6, 7): the rule's scopes for credentials, its `callers` for
// calls from an instance. Nothing to check while no rules can be configured.
import { Effect } from "effect"
import type { InsufficientScope } from "../../Errors.js"
import type { Caller } from "./Attestation.js"
import type { Principal } from "./DataPlaneRule.js"

export const checkCallerScope = (
  _namespace: string,
  _principal: Principal | undefined,
  _caller: Caller | undefined
): Effect.Effect<void, InsufficientScope> => Effect.void
