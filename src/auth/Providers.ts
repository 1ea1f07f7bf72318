// Credential providers (docs/config.md "Data-plane auth"), built once from the config: `jwt` (remote
// JWKS, PEM public key or HMAC secret, verified by jose with issuer, audience and a 5 s clock
// tolerance) and `apikey` (SHA-256 of the presented key, compared in constant time).
// A provider answers the principal, or nothing when it does not accept the credential.
import { createHash, createPublicKey, timingSafeEqual } from "node:crypto"
import { Clock, Effect, Option, Redacted } from "effect"
import { decodeProtectedHeader, jwtVerify, type JWTPayload, type JWTVerifyOptions } from "jose"
import type { ApiKeyProviderConfig, JwtProviderConfig, ProviderConfig } from "../Config.js"
import { CLOCK_TOLERANCE_S } from "../contract/Claims.js"
import { makeRemoteJwks, type FetchJwks, type VerificationKey } from "./Jwks.js"
import type { Principal } from "./Principal.js"

/** Verifies a credential: the principal it names, or none when this provider does not accept it. */
export type Provider = (credential: string) => Effect.Effect<Option.Option<Principal>>

const words = (text: string): ReadonlyArray<string> => text.split(" ").filter((word) => word !== "")

/** Scopes from `scope` (space-separated) or `scp` (a list, or space-separated). */
export const scopesOf = (payload: JWTPayload): ReadonlyArray<string> => {
  const { scope, scp } = payload
  if (typeof scope === "string") return words(scope)
  if (typeof scp === "string") return words(scp)
  if (Array.isArray(scp)) return scp.filter((s): s is string => typeof s === "string")
  return []
}

const principalOf = (payload: JWTPayload): Principal => ({
  subject: typeof payload.sub === "string" ? payload.sub : undefined,
  scopes: scopesOf(payload)
})

const rejected = Effect.succeed(Option.none<Principal>())

const jwtProvider = (config: JwtProviderConfig, fetchJwks: FetchJwks | undefined): Effect.Effect<Provider> =>
  Effect.gen(function* () {
    const options: JWTVerifyOptions = {
      clockTolerance: CLOCK_TOLERANCE_S,
      ...(config.issuer === undefined ? {} : { issuer: config.issuer }),
      ...(config.audience === undefined ? {} : { audience: config.audience as string | Array<string> })
    }
    let keyFor: (token: string) => Effect.Effect<VerificationKey | Uint8Array | ReturnType<typeof createPublicKey>, unknown>
    let algorithms = config.algorithms
    if (config.secret !== undefined) {
      const secret = new TextEncoder().encode(Redacted.value(config.secret))
      keyFor = () => Effect.succeed(secret)
      algorithms ??= ["HS256"]
    } else if (config.publicKey !== undefined) {
      const publicKey = createPublicKey(config.publicKey)
      keyFor = () => Effect.succeed(publicKey)
      algorithms ??= ["RS256"]
    } else {
      const jwks = yield* makeRemoteJwks(config.jwksUrl!, fetchJwks)
      keyFor = (token) => Effect.flatMap(Effect.try(() => decodeProtectedHeader(token)), jwks.keyFor)
    }
    const verifyOptions = algorithms === undefined ? options : { ...options, algorithms: [...algorithms] }
    return (credential) =>
      Effect.flatMap(keyFor(credential), (key) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.tryPromise(() => jwtVerify(credential, key, { ...verifyOptions, currentDate: new Date(now) }))
        )
      ).pipe(
        Effect.map(({ payload }) => Option.some(principalOf(payload))),
        Effect.catch(() => rejected)
      )
  })

const apiKeyProvider = (config: ApiKeyProviderConfig): Provider => {
  const keys = config.keys.map((key) => ({
    digest: Buffer.from(key.sha256, "hex"),
    principal: { subject: key.subject, scopes: key.scopes ?? [] } satisfies Principal
  }))
  return (credential) =>
    Effect.sync(() => {
      const digest = createHash("sha256").update(credential).digest()
      // Every key is compared, so the time taken does not tell which one matched.
      let found: Principal | undefined
      for (const key of keys) if (timingSafeEqual(digest, key.digest)) found ??= key.principal
      return Option.fromNullishOr(found)
    })
}

export const makeProvider = (config: ProviderConfig, fetchJwks?: FetchJwks): Effect.Effect<Provider> =>
  config.type === "jwt" ? jwtProvider(config, fetchJwks) : Effect.succeed(apiKeyProvider(config))
