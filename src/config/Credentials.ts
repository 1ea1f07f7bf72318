// The `credentials` section (docs/deploy.md "Credentials"): operator keys, and worker credentials
// (a key, or a JWT from a `jwt` provider) each with the worker ids and namespaces it may serve.
// Shapes only; what entries refer to and how they fit the mode is checked where a set is
// loaded (auth/CredentialSet.ts), at start-up and on every reload.
import { Effect, Schema } from "effect"
import { nonEmptyList, Sha256Hex } from "./Auth.js"
import { expected, expectedShape, NonEmptyString } from "./Fields.js"

const nonEmptyListOf = <S extends Schema.Top>(item: S, what: string) => nonEmptyList(item, `a non-empty list of ${what}`)

/** Stands for the JWT's subject in a worker pattern of a provider's entry. */
export const SUBJECT_PLACEHOLDER = "{sub}"

/** A worker id, or a prefix of one ending in `*`; `{sub}` may stand for the JWT's subject. */
const WorkerPattern = Schema.String.check(
  Schema.makeFilter(
    (s: string) => /^(?:[A-Za-z0-9._~-]|\{sub\})+\*?$|^\*$/.test(s) && s.length <= 129,
    expected('a worker id, a prefix ending in "*", or a pattern with {sub}')
  )
)

const NamespaceName = Schema.String.check(
  Schema.makeFilter((s: string) => /^\/[A-Za-z0-9._~-]{1,128}$/.test(s), expected('a namespace like "/threads"'))
)

/** Hostname-aware mode: one binding, its hostname lowercased, `*` for any. */
const BindingGrant = Schema.Struct({
  namespace: NamespaceName,
  hostname: Schema.String.check(
    Schema.makeFilter((s: string) => s === "*" || /^[A-Za-z0-9.-]{1,253}$/.test(s), expected('a hostname without a port, or "*"'))
  ),
  env: Schema.String.check(Schema.makeFilter((s: string) => /^[A-Za-z0-9._~-]{0,128}$/.test(s), expected("0-128 characters of [A-Za-z0-9._~-]")))
}).annotate(expectedShape('an object {"namespace","hostname","env"}'))

const NamespaceGrantSetting = Schema.Union([NamespaceName, BindingGrant]).annotate(
  expected('a namespace like "/threads", or in hostname-aware mode {"namespace","hostname","env"}')
)

const grantFields = {
  name: NonEmptyString,
  workers: nonEmptyListOf(WorkerPattern, "worker ids and prefixes"),
  namespaces: nonEmptyListOf(NamespaceGrantSetting, "namespaces")
}

export const WorkerKeyEntry = Schema.Struct({ ...grantFields, sha256: Sha256Hex }).annotate(expectedShape("an object"))

/** `subjects`, when given, are the only JWT subjects the entry admits (a Kubernetes service account's, say). */
export const WorkerJwtEntry = Schema.Struct({
  ...grantFields,
  provider: NonEmptyString,
  subjects: Schema.optionalKey(nonEmptyListOf(NonEmptyString, "subjects"))
}).annotate(expectedShape("an object"))

const OperatorEntry = Schema.Struct({ name: NonEmptyString, sha256: Sha256Hex }).annotate(expectedShape("an object"))

const withEmptyDefault = <S extends Schema.Top>(schema: S) => schema.pipe(Schema.withDecodingDefaultTypeKey(Effect.sync(() => [] as S["Type"])))

export const CredentialsSetting = Schema.Struct({
  operators: withEmptyDefault(Schema.Array(OperatorEntry).annotate(expectedShape("a list of operator entries"))),
  workers: withEmptyDefault(
    Schema.Array(
      Schema.Union([WorkerKeyEntry, WorkerJwtEntry]).annotate(expectedShape('an object with "sha256" or "provider"'))
    ).annotate(expectedShape("a list of worker entries"))
  )
}).annotate(expectedShape("an object"))

export type CredentialsSetting = typeof CredentialsSetting.Type
export type WorkerKeyEntry = typeof WorkerKeyEntry.Type
export type WorkerJwtEntry = typeof WorkerJwtEntry.Type

/**
 * In the configuration: the set itself, or the name of the file that holds it (read again on
 * SIGHUP and when it changes). The set is checked where it is loaded (auth/CredentialSet.ts),
 * so that a file's mistakes and the configuration's are told the same way.
 */
export const CredentialsSource = Schema.Union([NonEmptyString, Schema.Record(Schema.String, Schema.Unknown)]).annotate(
  expected("a credentials file's name, or a credentials object")
)
