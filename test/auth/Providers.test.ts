// Credential providers (docs/config.md "Providers"): jwt by secret, PEM public key or remote JWKS, and
// apikey. Expiry and tolerance run on TestClock: the provider reads the Clock's time.
import { createHash, generateKeyPairSync } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { TestClock } from "effect/testing"
import { exportJWK, SignJWT, type JWTPayload } from "jose"
import { makeProvider, type Provider } from "../../src/auth/Providers.js"
import type { ProviderConfig } from "../../src/Config.js"

const NOW_S = 1_800_000_000
const SECRET = "a-shared-secret-of-enough-length"
const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 })
const PEM = rsa.publicKey.export({ type: "spki", format: "pem" }).toString()

const hs256 = (payload: JWTPayload, secret = SECRET) =>
  new SignJWT(payload).setProtectedHeader({ alg: "HS256" }).sign(new TextEncoder().encode(secret))
const rs256 = (payload: JWTPayload, kid?: string) =>
  new SignJWT(payload).setProtectedHeader({ alg: "RS256", ...(kid === undefined ? {} : { kid }) }).sign(rsa.privateKey)

const claims = (overrides: JWTPayload = {}): JWTPayload => ({
  sub: "alice",
  iss: "https://id.example/",
  aud: "pinboard",
  iat: NOW_S,
  exp: NOW_S + 300,
  ...overrides
})

const secretProvider: ProviderConfig = { type: "jwt", secret: Redacted.make(SECRET), issuer: "https://id.example/", audience: "pinboard" }

/** The provider's answer for a credential, at NOW_S on the TestClock. */
const check = (config: ProviderConfig, credential: Promise<string> | string, atMs = NOW_S * 1000) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(atMs)
    const provider: Provider = yield* makeProvider(config)
    return Option.getOrUndefined(yield* provider(yield* Effect.promise(async () => credential)))
  })

describe("jwt provider with a secret (HS256)", () => {
  it.effect("accepts a good token: subject and scopes from `scope`", () =>
    Effect.gen(function* () {
      expect(yield* check(secretProvider, hs256(claims({ scope: "threads read" })))).toEqual({ subject: "alice", scopes: ["threads", "read"] })
    })
  )

  it.effect("scopes from `scp`, as a list or a space-separated string", () =>
    Effect.gen(function* () {
      expect((yield* check(secretProvider, hs256(claims({ scp: ["a", "b"] }))))?.scopes).toEqual(["a", "b"])
      expect((yield* check(secretProvider, hs256(claims({ scp: "a b" }))))?.scopes).toEqual(["a", "b"])
    })
  )

  it.effect("expiry with a 5 s tolerance, on the Clock", () =>
    Effect.gen(function* () {
      const token = hs256(claims({ exp: NOW_S }))
      expect(yield* check(secretProvider, token, NOW_S * 1000 + 4_999)).toBeDefined()
      expect(yield* check(secretProvider, token, NOW_S * 1000 + 5_000)).toBeUndefined()
    })
  )

  it.effect("not-before with the same tolerance", () =>
    Effect.gen(function* () {
      expect(yield* check(secretProvider, hs256(claims({ nbf: NOW_S + 4 })))).toBeDefined()
      expect(yield* check(secretProvider, hs256(claims({ nbf: NOW_S + 30 })))).toBeUndefined()
    })
  )

  const rejectedTokens: ReadonlyArray<readonly [string, () => Promise<string>]> = [
    ["another secret", () => hs256(claims(), "another-secret-of-enough-length")],
    ["wrong issuer", () => hs256(claims({ iss: "https://evil.example/" }))],
    ["wrong audience", () => hs256(claims({ aud: "someone-else" }))],
    ["RS256 where HS256 is expected", () => rs256(claims())],
    ["alg none", async () => `${Buffer.from('{"alg":"none"}').toString("base64url")}.${Buffer.from(JSON.stringify(claims())).toString("base64url")}.`],
    ["garbage", async () => "not.a.token"],
    ["one segment", async () => "%%%"],
    ["15 KiB of noise", async () => "x".repeat(15 * 1024)]
  ]
  it.effect.each(rejectedTokens)("rejects: %s", ([, token]) =>
    Effect.gen(function* () {
      expect(yield* check(secretProvider, token())).toBeUndefined()
    })
  )
})

describe("jwt provider with a PEM public key (RS256)", () => {
  const config: ProviderConfig = { type: "jwt", publicKey: PEM }

  it.effect("accepts an RS256 token", () =>
    Effect.gen(function* () {
      expect(yield* check(config, rs256(claims()))).toEqual({ subject: "alice", scopes: [] })
    })
  )

  it.effect("rejects HS256 signed with the public key's PEM bytes (algorithm confusion)", () =>
    Effect.gen(function* () {
      expect(yield* check(config, hs256(claims(), PEM))).toBeUndefined()
    })
  )
})

describe("jwt provider with a remote JWKS", () => {
  it.effect("accepts a token whose kid the key set holds", () =>
    Effect.gen(function* () {
      const jwk = { ...(yield* Effect.promise(() => exportJWK(rsa.publicKey))), kid: "k1", alg: "RS256" }
      yield* TestClock.setTime(NOW_S * 1000)
      const provider = yield* makeProvider({ type: "jwt", jwksUrl: "https://id.example/jwks.json" }, async () => ({ keys: [jwk] }))
      const token = yield* Effect.promise(() => rs256(claims(), "k1"))
      expect(Option.getOrUndefined(yield* provider(token))).toEqual({ subject: "alice", scopes: [] })
      expect(Option.isNone(yield* provider(yield* Effect.promise(() => rs256(claims(), "k2"))))).toBe(true)
    })
  )
})

describe("apikey provider", () => {
  const sha = (key: string) => createHash("sha256").update(key).digest("hex")
  const config: ProviderConfig = {
    type: "apikey",
    keys: [
      { sha256: sha("ci-key"), subject: "ci", scopes: ["threads"] },
      { sha256: sha("ops-key"), subject: "ops" }
    ]
  }

  it.effect("names the key's subject and scopes", () =>
    Effect.gen(function* () {
      expect(yield* check(config, "ci-key")).toEqual({ subject: "ci", scopes: ["threads"] })
      expect(yield* check(config, "ops-key")).toEqual({ subject: "ops", scopes: [] })
    })
  )

  it.effect("rejects any other key, its digest included", () =>
    Effect.gen(function* () {
      expect(yield* check(config, "ci-key ")).toBeUndefined()
      expect(yield* check(config, sha("ci-key"))).toBeUndefined()
    })
  )
})
