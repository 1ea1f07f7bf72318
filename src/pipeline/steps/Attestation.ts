// Step 2, attestation (DESIGN 7): a `Pinboard-Caller` token makes the request a call from
// an instance. The auth issue verifies it; until then every request is an outside one,
// which is exact while no data-plane rules can be configured (main.ts refuses them).
import type { IncomingHttpHeaders } from "node:http"
import { Effect } from "effect"
import type { AttestationExpired, InvalidAttestation, StaleAttestation } from "../../Errors.js"

/** The calling instance, from a verified `Pinboard-Caller`. */
export interface Caller {
  readonly worker: string
  readonly namespace: string
  readonly id: string
  readonly epoch: string
  /** The depth of the request the caller is serving. */
  readonly depth: number
}

export type AttestationError = InvalidAttestation | AttestationExpired | StaleAttestation

const outside: Effect.Effect<Caller | undefined> = Effect.succeed(undefined)

export const readCaller = (_headers: IncomingHttpHeaders): Effect.Effect<Caller | undefined, AttestationError> => outside
