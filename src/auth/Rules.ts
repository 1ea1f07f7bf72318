// Data-plane rules (docs/config.md "Data-plane auth"), compiled once from the config, and the pure decisions over
// them: which rule applies, where the credential is, whether scopes and callers are admitted.
import type { IncomingHttpHeaders } from "node:http"
import type { NamespaceRule } from "../Config.js"
import { cookieValue } from "../contract/Cookie.js"
import type { Provider } from "./Providers.js"

export interface CompiledRule {
  readonly namespace: string
  readonly auth: NamespaceRule["auth"]
  /** Tried in order. */
  readonly providers: ReadonlyArray<Provider>
  readonly scopes: ReadonlyArray<string>
  /** Namespaces whose instances may call (`*`: all); undefined: any attested instance. */
  readonly callers: ReadonlySet<string> | undefined
  readonly credentialIn: (headers: IncomingHttpHeaders) => string | undefined
}

/** The rule naming the namespace, else the `*` rule. */
export const ruleFor = <R>(rules: ReadonlyMap<string, R>, namespace: string): R | undefined => rules.get(namespace) ?? rules.get("*")

const BEARER = /^bearer /i

/** A header's value, `Bearer ` removed; empty counts as absent. */
export const credentialInHeader =
  (name: string) =>
  (headers: IncomingHttpHeaders): string | undefined => {
    const raw = headers[name]
    const value = Array.isArray(raw) ? raw[0] : raw
    if (value === undefined) return undefined
    const credential = BEARER.test(value) ? value.slice(7) : value
    return credential === "" ? undefined : credential
  }

export const credentialInCookie =
  (name: string) =>
  (headers: IncomingHttpHeaders): string | undefined => {
    const value = cookieValue(headers.cookie, name)
    return value === "" ? undefined : value
  }

export const holdsScopes = (required: ReadonlyArray<string>, held: ReadonlyArray<string>): boolean =>
  required.every((scope) => held.includes(scope))

export const admitsCaller = (callers: ReadonlySet<string> | undefined, callerNamespace: string): boolean =>
  callers === undefined || callers.has("*") || callers.has(callerNamespace)

export const compileRule = (rule: NamespaceRule, providersByName: ReadonlyMap<string, Provider>): CompiledRule => {
  const names = rule.providers ?? [...providersByName.keys()]
  const credential = rule.credential
  return {
    namespace: rule.namespace,
    auth: rule.auth,
    providers: names.map((name) => providersByName.get(name)!),
    scopes: rule.scopes ?? [],
    callers: rule.callers === undefined ? undefined : new Set(rule.callers),
    credentialIn:
      credential !== undefined && "cookie" in credential
        ? credentialInCookie(credential.cookie)
        : credentialInHeader(credential?.header ?? "authorization")
  }
}
