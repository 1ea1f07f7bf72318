// Step 3, depth (DESIGN 7): a call from an instance goes one deeper than the request it
// serves; past MAX_DEPTH it is refused.
import { Effect } from "effect"
import { DepthExceeded } from "../../Errors.js"
import { MAX_DEPTH } from "../Policies.js"
import type { Caller } from "./Attestation.js"

const outsideDepth = Effect.succeed(0)

export const depthOf = (caller: Caller | undefined): Effect.Effect<number, DepthExceeded> =>
  caller === undefined ? outsideDepth : caller.depth + 1 > MAX_DEPTH ? new DepthExceeded() : Effect.succeed(caller.depth + 1)
