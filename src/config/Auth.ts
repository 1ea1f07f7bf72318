// The data-plane auth sections of the configuration: `providers` and `namespaces`
// (docs/config.md "Data-plane auth", and 11 "Providers"). Shapes only; cross-references are checked in Schema.ts.
import { createPublicKey } from "node:crypto"
import { Schema } from "effect"
import { isHttpUrl } from "../serving/Otlp.js"
import { CookieName, expected, expectedShape, HeaderName, NonEmptyString } from "./Fields.js"

const exact = { exact: true } as const

const nonEmptyList = <S extends Schema.Schema.Any>(item: S, what: string) =>
  Schema.Array(item).pipe(Schema.filter((a) => a.length > 0, expectedShape(what)))

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

export const JwsAlgorithm = Schema.Literal(...HMAC_ALGORITHMS, ...ASYMMETRIC_ALGORITHMS).annotations(
  expected(`a JWS algorithm (${[...HMAC_ALGORITHMS, ...ASYMMETRIC_ALGORITHMS].join(", ")})`)
)

const JwtFields = Schema.Struct({
  type: Schema.Literal("jwt"),
  jwksUrl: Schema.optionalWith(Schema.String.pipe(Schema.filter(isHttpUrl, expected("an http: or https: URL"))), exact),
  publicKey: Schema.optionalWith(Schema.String.pipe(Schema.filter(isSpkiPem, expected("a PEM (SPKI) public key"))), exact),
  /** Used as its UTF-8 bytes (docs/config.md "Providers"). */
  secret: Schema.optionalWith(Schema.Redacted(NonEmptyString), exact),
  issuer: Schema.optionalWith(NonEmptyString, exact),
  audience: Schema.optionalWith(
    Schema.Union(NonEmptyString, nonEmptyList(NonEmptyString, "a non-empty list")).annotations(
      expected("a non-empty string or a non-empty list of them")
    ),
    exact
  ),
  /** Defaults (docs/config.md "Providers"): HS256 for `secret`, RS256 for `publicKey`, the JWKS keys' own `alg`. */
  algorithms: Schema.optionalWith(nonEmptyList(JwsAlgorithm, "a non-empty list of JWS algorithms"), exact)
}).annotations(expectedShape("an object"))

export const JwtProvider = JwtFields.pipe(
  Schema.filter((p) => {
    const keySources = [p.jwksUrl, p.publicKey, p.secret].filter((k) => k !== undefined).length
    if (keySources !== 1) return "expected exactly one of jwksUrl, publicKey or secret"
    const algorithms = p.algorithms ?? []
    // A key that can never verify the listed algorithms would reject every token, silently.
    if (p.secret !== undefined && !algorithms.every(isHmac)) {
      return { path: ["algorithms"], message: "expected only HS256, HS384 or HS512 with secret" }
    }
    if (p.secret === undefined && algorithms.some(isHmac)) {
      return { path: ["algorithms"], message: "expected no HS* algorithm without secret" }
    }
    return true
  })
)

const Sha256Hex = Schema.transform(
  Schema.String.pipe(Schema.filter((s) => /^[0-9A-Fa-f]{64}$/.test(s), expected("64 hex digits (a SHA-256)"))),
  Schema.String,
  { strict: true, decode: (s) => s.toLowerCase(), encode: (s) => s }
)

export const ApiKeyProvider = Schema.Struct({
  type: Schema.Literal("apikey"),
  keys: nonEmptyList(
    Schema.Struct({
      /** SHA-256 of the key, lowercased; plain keys never appear in config. */
      sha256: Sha256Hex,
      subject: NonEmptyString,
      scopes: Schema.optionalWith(Schema.Array(NonEmptyString), exact)
    }).annotations(expectedShape("an object")),
    "a non-empty list of keys"
  )
}).annotations(expectedShape("an object"))

export const Provider = Schema.Union(JwtProvider, ApiKeyProvider).annotations(
  expectedShape(`an object with "type": "jwt" or "apikey"`)
)
export type ProviderConfig = typeof Provider.Type
export type JwtProviderConfig = typeof JwtProvider.Type
export type ApiKeyProviderConfig = typeof ApiKeyProvider.Type

/** `/` + `[A-Za-z0-9._~-]{1,128}` (docs/registry-api.md), or `*` for every namespace. */
const NamespaceOrAll = Schema.String.pipe(
  Schema.filter((s) => s === "*" || /^\/[A-Za-z0-9._~-]{1,128}$/.test(s), expected(`"*" or a namespace like "/threads"`))
)

const Credential = Schema.Union(
  Schema.Struct({ header: HeaderName }),
  Schema.Struct({ cookie: CookieName })
).annotations(expected(`{"header": <name>} or {"cookie": <name>}`))

export const NamespaceRule = Schema.Struct({
  namespace: NamespaceOrAll,
  auth: Schema.Literal("none", "optional", "required").annotations(expected(`"none", "optional" or "required"`)),
  /** Names of `providers`, tried in this order. */
  providers: Schema.optionalWith(Schema.Array(NonEmptyString), exact),
  /** Every one must be in the principal's scopes; not applied to attested calls (docs/config.md). */
  scopes: Schema.optionalWith(Schema.Array(NonEmptyString), exact),
  /** Namespaces whose instances may call; `*` for all; absent: any attested instance. */
  callers: Schema.optionalWith(Schema.Array(NamespaceOrAll), exact),
  /** Absent: the `authorization` header, `Bearer ` prefix removed. Header names are lowercased. */
  credential: Schema.optionalWith(Credential, exact)
}).annotations(expectedShape("an object"))
export type NamespaceRule = typeof NamespaceRule.Type
