// Step 4, data-plane rule (seed "Authentication", DESIGN 6): who may reach the namespace.
// Open when the server has no `namespaces` rules, the only configuration main.ts accepts
// until the auth issue enforces rules; a call from an instance skips this step.
import type { IncomingHttpHeaders } from "node:http"
import { Effect } from "effect"
import type { AuthenticationRequired, InvalidCredential, NamespaceNotAllowed } from "../../Errors.js"
import type { Caller } from "./Attestation.js"

/** Who the credential says the client is. */
export interface Principal {
  readonly subject: string
  readonly scopes: ReadonlyArray<string>
}

export type RuleError = NamespaceNotAllowed | AuthenticationRequired | InvalidCredential

const open: Effect.Effect<Principal | undefined> = Effect.succeed(undefined)

export const admitByRule = (
  _namespace: string,
  _headers: IncomingHttpHeaders,
  _caller: Caller | undefined
): Effect.Effect<Principal | undefined, RuleError> => open
