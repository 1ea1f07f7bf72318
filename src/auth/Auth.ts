// The auth service: data-plane rules with their providers, the attestation signer and the
// Pinboard-Caller verifier, all built once at start-up from the config (docs/config.md "Data-plane auth").
import { Clock, Context, Effect, Layer, Redacted } from "effect"
import { AppConfig } from "../AppConfig.js"
import type { PinboardConfig } from "../Config.js"
import { AttestationExpired, InvalidAttestation } from "../Errors.js"
import { makeAttestationSigner, type AttestationClaims } from "./Attestation.js"
import { attestationKey } from "../contract/AttestationKey.js"
import { verifyCallerToken, type CallerClaims } from "./CallerToken.js"
import { makeProvider, type Provider } from "./Providers.js"
import { compileRule, type CompiledRule } from "./Rules.js"

export interface AuthService {
  /** The data-plane rules by namespace (`*` included); undefined when there are none: open. */
  readonly rules: ReadonlyMap<string, CompiledRule> | undefined
  readonly verifyCaller: (token: string) => Effect.Effect<CallerClaims, InvalidAttestation | AttestationExpired>
  /** A `Pinboard-Attestation` for a forward, as of the Clock's time. */
  readonly attest: (claims: AttestationClaims) => string
}

/** What auth is built from: the deployment token (the attestation key), providers and rules. */
export type AuthSettings = Pick<PinboardConfig, "token" | "providers" | "namespaces">

export class Auth extends Context.Service<Auth, AuthService>()("pinboard/Auth") {
  static readonly layer: Layer.Layer<Auth, never, AppConfig> = Layer.effect(Auth, Effect.flatMap(AppConfig, (config) => makeAuth(config)))
}

const makeAuth = (config: AuthSettings): Effect.Effect<AuthService> =>
  Effect.gen(function* () {
    const clock = yield* Clock.Clock
    const key = attestationKey(Redacted.value(config.token))
    const sign = makeAttestationSigner({ alg: "HS256", secret: key })
    const providers = new Map<string, Provider>()
    for (const [name, provider] of Object.entries(config.providers)) providers.set(name, yield* makeProvider(provider))
    const rules =
      config.namespaces === undefined
        ? undefined
        : new Map(config.namespaces.map((rule) => [rule.namespace, compileRule(rule, providers)] as const))
    return {
      rules,
      verifyCaller: (token) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.flatMap(
            Effect.promise(() => verifyCallerToken(token, key, now)),
            (verified): Effect.Effect<CallerClaims, InvalidAttestation | AttestationExpired> =>
              verified === "invalid" ? new InvalidAttestation() : verified === "expired" ? new AttestationExpired() : Effect.succeed(verified)
          )
        ),
      attest: (claims) => sign(claims, clock.currentTimeMillisUnsafe())
    }
  })
