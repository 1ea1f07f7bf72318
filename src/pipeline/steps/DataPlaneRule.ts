// Step 4, data-plane rule (docs/config.md "Data-plane auth"): the namespace's rule, else `*`, else 403; then the
// credential, checked by the rule's providers in order. Calls from an instance skip it,
// keeping only the rule itself for the caller-scope step.
import type { IncomingHttpHeaders } from "node:http"
import { Effect, Option } from "effect"
import type { Principal } from "../../auth/Principal.js"
import { ruleFor, type CompiledRule } from "../../auth/Rules.js"
import { AuthenticationRequired, InvalidCredential, NamespaceNotAllowed } from "../../Errors.js"
import type { CallerClaims } from "../../auth/CallerToken.js"

export type { Principal }

export type RuleError = NamespaceNotAllowed | AuthenticationRequired | InvalidCredential

/** The rule that applied (none when there are no rules) and the principal its credential named. */
export interface Admission {
  readonly rule: CompiledRule | undefined
  readonly principal: Principal | undefined
}

const open: Effect.Effect<Admission> = Effect.succeed({ rule: undefined, principal: undefined })

/** The first of the rule's providers, in order, to accept the credential names its principal. */
const firstAccepting = (rule: CompiledRule, credential: string): Effect.Effect<Admission, InvalidCredential> =>
  Effect.gen(function* () {
    for (const provider of rule.providers) {
      const principal = yield* provider(credential)
      if (Option.isSome(principal)) return { rule, principal: principal.value }
    }
    return yield* new InvalidCredential()
  })

/** `rules`: the compiled rules by namespace; undefined when there are none (open). */
export const admitByRule = (
  rules: ReadonlyMap<string, CompiledRule> | undefined,
  namespace: string,
  headers: IncomingHttpHeaders,
  caller: CallerClaims | undefined
): Effect.Effect<Admission, RuleError> => {
  if (rules === undefined) return open
  const rule = ruleFor(rules, namespace)
  if (caller !== undefined) return Effect.succeed({ rule, principal: undefined })
  if (rule === undefined) return new NamespaceNotAllowed()
  if (rule.auth === "none") return Effect.succeed({ rule, principal: undefined })
  const credential = rule.credentialIn(headers)
  if (credential === undefined) {
    return rule.auth === "required" ? new AuthenticationRequired() : Effect.succeed({ rule, principal: undefined })
  }
  return firstAccepting(rule, credential)
}
