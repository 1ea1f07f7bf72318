// The data-plane auth sections of the configuration: `providers` and `namespaces`
// (docs/config.md "Data-plane auth", and 11 "Providers"). Shapes only; cross-references are checked in Schema.ts.
import { createPublicKey } from "node:crypto"
import { Schema, SchemaTransformation } from "effect"
import { isHttpUrl } from "../serving/Otlp.js"
import { CookieName, expected, expectedShape, HeaderName, NonEmptyString } from "./Fields.js"

/** A list; `what` names it when something else is given. */
const listOf = <S extends Schema.Top>(item: S, what: string) => Schema.Array(item).annotate(expectedShape(what))

/** A list of at least one item; `what` also names the list when something else is given. */
export const nonEmptyList = <S extends Schema.Top>(item: S, what: string) =>
  Schema.Array(item).check(Schema.makeFilter((a: ReadonlyArray<unknown>) => a.length > 0, expectedShape(what)))

const isSpkiPem = (s: string): boolean => {
  if (!s.includes("-----BEGIN PUBLIC KEY-----")) return false
  try {
    createPublicKey(s)
    return true
  } catch {
    return false
  }
}

const HMAC_ALGORITHMS = ["HS256", "HS384", "HS512"] as const
const ASYMMETRIC_ALGORITHMS = [
  "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"
] as const
const isHmac = (alg: string): boolean => (HMAC_ALGORITHMS as ReadonlyArray<string>).includes(alg)

export const JwsAlgorithm = Schema.Literals([...HMAC_ALGORITHMS, ...ASYMMETRIC_ALGORITHMS]).annotate(
  expected(`a JWS algorithm (${[...HMAC_ALGORITHMS, ...ASYMMETRIC_ALGORITHMS].join(", ")})`)
)

const JwtFields = Schema.Struct({
  type: Schema.Literal("jwt"),
  jwksUrl: Schema.optionalKey(Schema.String.check(Schema.makeFilter(isHttpUrl, expected("an http: or https: URL")))),
  publicKey: Schema.optionalKey(Schema.String.check(Schema.makeFilter(isSpkiPem, expected("a PEM (SPKI) public key")))),
  /** Used as its UTF-8 bytes (docs/config.md "Providers"). */
  secret: Schema.optionalKey(Schema.RedactedFromValue(NonEmptyString)),
  issuer: Schema.optionalKey(NonEmptyString),
  audience: Schema.optionalKey(
    Schema.Union([NonEmptyString, nonEmptyList(NonEmptyString, "a non-empty list")]).annotate(
      expected("a non-empty string or a non-empty list of them")
    )
  ),
  /** Defaults (docs/config.md "Providers"): HS256 for `secret`, RS256 for `publicKey`, the JWKS keys' own `alg`. */
  algorithms: Schema.optionalKey(nonEmptyList(JwsAlgorithm, "a non-empty list of JWS algorithms"))
}).annotate(expectedShape("an object"))

export const JwtProvider = JwtFields.check(
  Schema.makeFilter((p: typeof JwtFields.Type) => {
    const keySources = [p.jwksUrl, p.publicKey, p.secret].filter((k) => k !== undefined).length
    if (keySources !== 1) return "expected exactly one of jwksUrl, publicKey or secret"
    const algorithms = p.algorithms ?? []
    // A key that can never verify the listed algorithms would reject every token, silently.
    if (p.secret !== undefined && !algorithms.every(isHmac)) {
      return { path: ["algorithms"], issue: "expected only HS256, HS384 or HS512 with secret" }
    }
    if (p.secret === undefined && algorithms.some(isHmac)) {
      return { path: ["algorithms"], issue: "expected no HS* algorithm without secret" }
    }
    return true
  })
)

export const Sha256Hex = Schema.String.check(
  Schema.makeFilter((s: string) => /^[0-9A-Fa-f]{64}$/.test(s), expected("64 hex digits (a SHA-256)"))
).pipe(Schema.decodeTo(Schema.String, SchemaTransformation.toLowerCase()))

export const ApiKeyProvider = Schema.Struct({
  type: Schema.Literal("apikey"),
  keys: nonEmptyList(
    Schema.Struct({
      /** SHA-256 of the key, lowercased; plain keys never appear in config. */
      sha256: Sha256Hex,
      subject: NonEmptyString,
      scopes: Schema.optionalKey(listOf(NonEmptyString, "a list of scopes"))
    }).annotate(expectedShape("an object")),
    "a non-empty list of keys"
  )
}).annotate(expectedShape("an object"))

export const ProviderSetting = Schema.Union([JwtProvider, ApiKeyProvider]).annotate(
  expectedShape(`an object with "type": "jwt" or "apikey"`)
)
export type ProviderConfig = typeof ProviderSetting.Type
export type JwtProviderConfig = typeof JwtProvider.Type
export type ApiKeyProviderConfig = typeof ApiKeyProvider.Type

/** `/` + `[A-Za-z0-9._~-]{1,128}` (docs/registry-api.md), or `*` for every namespace. */
const NamespaceOrAll = Schema.String.check(
  Schema.makeFilter((s: string) => s === "*" || /^\/[A-Za-z0-9._~-]{1,128}$/.test(s), expected(`"*" or a namespace like "/threads"`))
)

const Credential = Schema.Union([
  Schema.Struct({ header: HeaderName }),
  Schema.Struct({ cookie: CookieName })
]).annotate(expected(`{"header": <name>} or {"cookie": <name>}`))

export const NamespaceRule = Schema.Struct({
  namespace: NamespaceOrAll,
  auth: Schema.Literals(["none", "optional", "required"]).annotate(expected(`"none", "optional" or "required"`)),
  /** Names of `providers`, tried in this order. */
  providers: Schema.optionalKey(listOf(NonEmptyString, "a list of provider names")),
  /** Every one must be in the principal's scopes; not applied to attested calls (docs/config.md). */
  scopes: Schema.optionalKey(listOf(NonEmptyString, "a list of scopes")),
  /** Namespaces whose instances may call; `*` for all; absent: any attested instance. */
  callers: Schema.optionalKey(listOf(NamespaceOrAll, `a list of namespaces or "*"`)),
  /** Absent: the `authorization` header, `Bearer ` prefix removed. Header names are lowercased. */
  credential: Schema.optionalKey(Credential)
}).annotate(expectedShape("an object"))
export type NamespaceRule = typeof NamespaceRule.Type
