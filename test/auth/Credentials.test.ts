// Credentials by role (docs/deploy.md "Credentials"): a set loaded and checked, and who a
// registry call's `Authorization` names: the deployment token and operator keys (operators), a
// worker key or a worker JWT (a worker, with its entry's grant), or nobody (401).
import { createHash } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Redacted, Result } from "effect"
import { TestClock } from "effect/testing"
import { SignJWT, type JWTPayload } from "jose"
import { type CredentialContext, loadCredentialSet } from "../../src/config/CredentialSet.js"
import { makeCredentials } from "../../src/auth/Credentials.js"
import { configForTests } from "../support/TestConfig.js"

const dir = mkdtempSync(join(tmpdir(), "pinboard-credentials-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const sha256 = (key: string) => createHash("sha256").update(key).digest("hex")
const NOW_S = 1_800_000_000
const JWT_SECRET = "the workload identity issuer's secret"

const context: CredentialContext = {
  hostnameAware: false,
  providers: { k8s: { type: "jwt", secret: Redacted.make(JWT_SECRET), audience: "pinboard" }, keys: { type: "apikey", keys: [{ sha256: sha256("x"), subject: "x" }] } },
  attestation: { keys: ["attestation.pem"] }
}

const SET = {
  operators: [{ name: "oncall", sha256: sha256("operator-key") }],
  workers: [
    { name: "chat", sha256: sha256("chat-key"), workers: ["chat-*", "lobby"], namespaces: ["/threads", "/rooms"] },
    { name: "docs", provider: "k8s", workers: ["{sub}"], namespaces: ["/docs"] },
    { name: "billing", provider: "k8s", subjects: ["system:serviceaccount:prod:billing"], workers: ["billing-*"], namespaces: ["/billing"] }
  ]
}

const problemOf = (value: unknown, ctx: CredentialContext = context) => {
  const loaded = loadCredentialSet({ _tag: "Inline", value }, ctx)
  return Result.isFailure(loaded) ? loaded.failure : undefined
}

describe("a credentials set", () => {
  it("loads inline and from a file", () => {
    expect(problemOf(SET)).toBeUndefined()
    const path = join(dir, "credentials.json")
    writeFileSync(path, JSON.stringify(SET))
    const loaded = loadCredentialSet({ _tag: "File", path }, context)
    expect(Result.isSuccess(loaded) && loaded.success.workerKeys[0]?.namespaces).toEqual([
      { namespace: "/threads", hostname: "", env: "" },
      { namespace: "/rooms", hostname: "", env: "" }
    ])
  })

  it("refuses what the schema refuses, naming the field", () => {
    expect(problemOf({ operators: [{ name: "oncall", sha256: "not hex" }] })).toBe('operators[0].sha256: expected 64 hex digits (a SHA-256), got "not hex"')
    expect(problemOf({ workers: [{ name: "w", sha256: sha256("k"), workers: [], namespaces: ["/a"] }] })).toContain("workers[0]")
    expect(problemOf({ workers: [{ name: "w", sha256: sha256("k"), workers: ["a b"], namespaces: ["/a"] }] })).toContain("workers[0]")
    expect(problemOf({ admins: [] })).toContain("admins: unknown option")
  })

  it("refuses entries that clash, providers that are not jwt, {sub} without a provider", () => {
    expect(problemOf({ operators: [{ name: "a", sha256: sha256("k") }, { name: "a", sha256: sha256("l") }] })).toContain(
      'operators[1].name: expected a name no other entry has, got "a"'
    )
    expect(problemOf({ operators: [{ name: "a", sha256: sha256("k") }], workers: [{ name: "b", sha256: sha256("k"), workers: ["w"], namespaces: ["/a"] }] })).toBe(
      "workers[0].sha256: expected a key no other entry has"
    )
    expect(problemOf({ workers: [{ name: "b", provider: "keys", workers: ["w"], namespaces: ["/a"] }] })).toBe(
      'workers[0].provider: expected the name of a jwt provider in providers, got "keys"'
    )
    expect(problemOf({ workers: [{ name: "b", provider: "nope", workers: ["w"], namespaces: ["/a"] }] })).toContain("workers[0].provider")
    expect(problemOf({ workers: [{ name: "b", sha256: sha256("k"), workers: ["{sub}"], namespaces: ["/a"] }] })).toBe(
      "workers[0].workers[0]: expected no {sub} in an entry without a provider"
    )
  })

  it("takes namespaces as the mode writes them", () => {
    const binding = { namespace: "/docs", hostname: "*", env: "prod" }
    expect(problemOf({ workers: [{ name: "b", sha256: sha256("k"), workers: ["w"], namespaces: [binding] }] })).toContain("hostname-aware mode")
    expect(problemOf({ workers: [{ name: "b", sha256: sha256("k"), workers: ["w"], namespaces: ["/docs"] }] }, { ...context, hostnameAware: true })).toContain(
      "in hostname-aware mode"
    )
    expect(problemOf({ workers: [{ name: "b", sha256: sha256("k"), workers: ["w"], namespaces: [binding] }] }, { ...context, hostnameAware: true })).toBeUndefined()
  })

  it("refuses worker credentials without attestation keys: the token-derived key would be shared by every worker", () => {
    expect(problemOf(SET, { ...context, attestation: { keys: [] } })).toContain("workers: expected attestation keys")
    expect(problemOf({ operators: SET.operators }, { ...context, attestation: { keys: [] } })).toBeUndefined()
  })

  it("refuses a file that is not JSON or cannot be read", () => {
    const path = join(dir, "broken.json")
    writeFileSync(path, "{")
    const broken = loadCredentialSet({ _tag: "File", path }, context)
    expect(Result.isFailure(broken) && broken.failure).toMatch(/^invalid JSON/)
    const missing = loadCredentialSet({ _tag: "File", path: join(dir, "missing.json") }, context)
    expect(Result.isFailure(missing) && missing.failure).toMatch(/^cannot read it/)
  })
})

const jwt = (payload: JWTPayload, secret = JWT_SECRET) =>
  Effect.promise(() =>
    new SignJWT({ aud: "pinboard", iat: NOW_S, exp: NOW_S + 600, ...payload }).setProtectedHeader({ alg: "HS256" }).sign(new TextEncoder().encode(secret))
  )

const credentialsOf = (value: unknown = SET) => {
  const loaded = loadCredentialSet({ _tag: "Inline", value }, context)
  if (Result.isFailure(loaded)) throw new Error(loaded.failure)
  return makeCredentials({ ...configForTests({ token: Redacted.make("deployment-token") }), ...context, credentials: value as Record<string, unknown> }, loaded.success)
}

const whoIs = (authorization: string | undefined, credentials = credentialsOf()) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(NOW_S * 1000)
    return yield* Effect.result(credentials.identify(authorization))
  })

describe("who calls the registry", () => {
  it.effect("the deployment token and operator keys are operators", () =>
    Effect.gen(function* () {
      expect(yield* whoIs("Bearer deployment-token")).toEqual(Result.succeed({ _tag: "Operator", name: "deployment token" }))
      expect(yield* whoIs("Bearer operator-key")).toEqual(Result.succeed({ _tag: "Operator", name: "oncall" }))
    }))

  it.effect("a worker key is its entry's worker", () =>
    Effect.gen(function* () {
      const caller = yield* whoIs("Bearer chat-key")
      expect(caller).toEqual(
        Result.succeed({
          _tag: "Worker",
          name: "chat",
          grant: {
            owners: { exact: ["lobby"], prefixes: ["chat-"] },
            namespaces: [{ namespace: "/threads", hostname: "", env: "" }, { namespace: "/rooms", hostname: "", env: "" }]
          }
        })
      )
    }))

  it.effect("anything else is 401 invalid deployment token", () =>
    Effect.gen(function* () {
      for (const authorization of [undefined, "", "deployment-token", "Bearer ", "Bearer other", "Basic deployment-token", "bearer operator-key"]) {
        const caller = yield* whoIs(authorization)
        expect(Result.isFailure(caller) && caller.failure._tag).toBe("InvalidDeploymentToken")
      }
    }))

  it.effect("a JWT from a worker entry's provider is that entry's worker, {sub} its subject", () =>
    Effect.gen(function* () {
      const caller = yield* whoIs(`Bearer ${yield* jwt({ sub: "docs-7" })}`)
      expect(caller).toEqual(
        Result.succeed({
          _tag: "Worker",
          name: "docs",
          grant: { owners: { exact: ["docs-7"], prefixes: [] }, namespaces: [{ namespace: "/docs", hostname: "", env: "" }] }
        })
      )
    }))

  it.effect("an entry with subjects admits those subjects only", () =>
    Effect.gen(function* () {
      const billing = yield* whoIs(`Bearer ${yield* jwt({ sub: "system:serviceaccount:prod:billing" })}`)
      expect(Result.isSuccess(billing) && billing.success._tag === "Worker" && billing.success.grant.owners.prefixes).toEqual(["billing-"])
      expect(Result.isSuccess(billing) && billing.success.name).toBe("docs,billing")
    }))

  it.effect("a JWT the provider refuses (signature, expiry, audience) is 401", () =>
    Effect.gen(function* () {
      for (const token of [yield* jwt({ sub: "docs-7" }, "another secret"), yield* jwt({ sub: "docs-7", exp: NOW_S - 60 }), yield* jwt({ sub: "docs-7", aud: "other" })]) {
        const caller = yield* whoIs(`Bearer ${token}`)
        expect(Result.isFailure(caller)).toBe(true)
      }
    }))

  it.effect("a JWT without a subject gets no {sub} pattern", () =>
    Effect.gen(function* () {
      const caller = yield* whoIs(`Bearer ${yield* jwt({})}`)
      expect(Result.isSuccess(caller) && caller.success._tag === "Worker" && caller.success.grant.owners).toEqual({ exact: [], prefixes: [] })
    }))

  it.effect("without credentials the deployment token is the one credential", () =>
    Effect.gen(function* () {
      const alone = makeCredentials(configForTests({ token: Redacted.make("deployment-token") }), { operators: [], workerKeys: [], workerJwts: [] })
      expect(yield* whoIs("Bearer deployment-token", alone)).toEqual(Result.succeed({ _tag: "Operator", name: "deployment token" }))
      expect(Result.isFailure(yield* whoIs("Bearer chat-key", alone))).toBe(true)
    }))
})

describe("a credentials file read again", () => {
  it.effect("a removed key is refused from the next call; a file that does not load keeps the set in use", () =>
    Effect.gen(function* () {
      const path = join(dir, "rotating.json")
      writeFileSync(path, JSON.stringify(SET))
      const loaded = loadCredentialSet({ _tag: "File", path }, context)
      if (Result.isFailure(loaded)) throw new Error(loaded.failure)
      const credentials = makeCredentials({ ...configForTests(), ...context, credentials: path }, loaded.success)
      expect(Result.isSuccess(yield* whoIs("Bearer chat-key", credentials))).toBe(true)

      writeFileSync(path, JSON.stringify({ ...SET, workers: SET.workers.slice(1) }))
      expect(Result.isSuccess(credentials.reload())).toBe(true)
      expect(Result.isFailure(yield* whoIs("Bearer chat-key", credentials))).toBe(true)

      writeFileSync(path, "{ not json")
      expect(Result.isFailure(credentials.reload())).toBe(true)
      expect(Result.isSuccess(yield* whoIs("Bearer operator-key", credentials))).toBe(true)
    }))
})
