// Step 3, depth (docs/config.md): a call from an instance goes one deeper than the request it
// serves; past MAX_DEPTH it is refused.
import { Effect } from "effect"
import { DepthExceeded } from "../../Errors.js"
import type { CallerClaims } from "../../auth/CallerToken.js"

/** Instance call depth (docs/config.md). */
export const MAX_DEPTH = 50

const outsideDepth = Effect.succeed(0)

export const depthOf = (caller: CallerClaims | undefined): Effect.Effect<number, DepthExceeded> =>
  caller === undefined ? outsideDepth : caller.depth + 1 > MAX_DEPTH ? new DepthExceeded() : Effect.succeed(caller.depth + 1)
