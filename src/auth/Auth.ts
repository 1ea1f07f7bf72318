// The auth service: data-plane rules with their providers, the attestation signer (SigningKeys.ts)
// and the Pinboard-Caller verifier, built once at start-up from the config (docs/config.md
// "Data-plane auth", docs/deploy.md "Credentials"); the attestation keys are read again on
// SIGHUP and when their files change.
import { Clock, Context, Effect, Layer, Result } from "effect"
import { AppConfig } from "../AppConfig.js"
import type { PinboardConfig } from "../Config.js"
import { AttestationExpired, InvalidAttestation } from "../Errors.js"
import { reloadWhileScoped } from "../serving/FileReload.js"
import type { AttestationClaims } from "./Attestation.js"
import type { AttestationPublicJwk } from "../config/AttestationKeys.js"
import { verifyCallerToken, type CallerClaims } from "./CallerToken.js"
import { makeProvider, type Provider } from "./Providers.js"
import { compileRule, type CompiledRule } from "./Rules.js"
import { makeSigningKeys, type SigningKeys } from "./SigningKeys.js"

/**
 * What `Pinboard-Caller` tokens are signed with: the key derived from the deployment token, or,
 * with attestation keys, the calling incarnation's own `callerKey` (found in the registry).
 */
export type CallerKeys = { readonly _tag: "DeploymentToken"; readonly key: Uint8Array } | { readonly _tag: "PerIncarnation" }

export interface AuthService {
  /** The data-plane rules by namespace (`*` included); undefined when there are none: open. */
  readonly rules: ReadonlyMap<string, CompiledRule> | undefined
  readonly callerKeys: CallerKeys
  /** A caller token's claims, its HS256 signature checked with `key`, as of the Clock's time. */
  readonly verifyCaller: (token: string, key: Uint8Array) => Effect.Effect<CallerClaims, InvalidAttestation | AttestationExpired>
  /** A `Pinboard-Attestation` for a forward, as of the Clock's time. */
  readonly attest: (claims: AttestationClaims) => string
  /** The attestation keys' public JWKs, for `GET /registry/keys`; none without keys. */
  readonly publishedKeys: () => ReadonlyArray<AttestationPublicJwk>
}

/** What auth is built from: the deployment token or the attestation keys, providers and rules. */
export type AuthSettings = Pick<PinboardConfig, "token" | "providers" | "namespaces" | "attestation">

export class Auth extends Context.Service<Auth, AuthService>()("pinboard/Auth") {
  static readonly layer: Layer.Layer<Auth, never, AppConfig> = Layer.effect(
    Auth,
    Effect.gen(function* () {
      const config = yield* AppConfig
      const keys = makeSigningKeys(config)
      const paths = config.attestation.keys
      if (paths.length > 0) {
        yield* reloadWhileScoped(paths, (trigger) =>
          Result.match(keys.reload(), {
            onSuccess: () => Effect.logInfo("attestation keys loaded").pipe(Effect.annotateLogs({ trigger, signing: keys.published()[0]?.kid })),
            onFailure: (problem) =>
              Effect.logWarning("attestation keys refused, the ones in use are kept").pipe(
                Effect.annotateLogs({ trigger, file: problem.path, reason: problem.message })
              )
          })
        )
      }
      return yield* makeAuth(config, keys)
    })
  )
}

const makeAuth = (config: AuthSettings, keys: SigningKeys): Effect.Effect<AuthService> =>
  Effect.gen(function* () {
    const clock = yield* Clock.Clock
    const providers = new Map<string, Provider>()
    for (const [name, provider] of Object.entries(config.providers)) providers.set(name, yield* makeProvider(provider))
    const rules =
      config.namespaces === undefined
        ? undefined
        : new Map(config.namespaces.map((rule) => [rule.namespace, compileRule(rule, providers)] as const))
    return {
      rules,
      callerKeys: keys.derivedKey === undefined ? { _tag: "PerIncarnation" } : { _tag: "DeploymentToken", key: keys.derivedKey },
      verifyCaller: (token, key) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.flatMap(
            Effect.promise(() => verifyCallerToken(token, key, now)),
            (verified): Effect.Effect<CallerClaims, InvalidAttestation | AttestationExpired> =>
              verified === "invalid" ? new InvalidAttestation() : verified === "expired" ? new AttestationExpired() : Effect.succeed(verified)
          )
        ),
      attest: (claims) => keys.attest(claims, clock.currentTimeMillisUnsafe()),
      publishedKeys: keys.published
    }
  })
