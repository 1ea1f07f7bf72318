// Steps 2, 3, 4 and 6 of the check order (docs/proxy.md "Check order"), each on its own: the caller's
// attestation and its placement, the call depth, the namespace's data-plane rule with its
// credential, and the caller scope. Every refusal is the catalogue row the step signs for.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Result, Option } from "effect"
import type { AuthService } from "../../src/auth/Auth.js"
import type { CallerClaims } from "../../src/auth/CallerToken.js"
import type { Provider } from "../../src/auth/Providers.js"
import { compileRule, type CompiledRule } from "../../src/auth/Rules.js"
import type { NamespaceRule } from "../../src/Config.js"
import { AttestationExpired, InvalidAttestation, NotPlaced, RegistryUnavailable } from "../../src/Errors.js"
import type { PlacementKey, PlacementView } from "../../src/registry/Domain.js"
import type { RegistryService } from "../../src/registry/Registry.js"
import { readCaller } from "../../src/pipeline/steps/Attestation.js"
import { checkCallerScope } from "../../src/pipeline/steps/CallerScope.js"
import { admitByRule } from "../../src/pipeline/steps/DataPlaneRule.js"
import { depthOf, MAX_DEPTH } from "../../src/pipeline/steps/Depth.js"

const claims: CallerClaims = { worker: "w1", namespace: "/rooms", id: "r1", epoch: "17", env: "prod", depth: 2 }

const view = (overrides: Partial<PlacementView> = {}): PlacementView => ({
  env: "prod",
  namespace: "/rooms",
  id: "r1",
  worker: "w1",
  incarnation: "i1",
  epoch: "17",
  placedAt: 0,
  hostname: "",
  tag: "",
  windDownAt: 0,
  advertiseUrl: "http://w1.test/",
  live: true,
  ...overrides
})

/** Verifies "good" to `claims`, "expired" as past its exp, anything else as invalid. */
const auth = {
  rules: undefined,
  callerKeys: { _tag: "DeploymentToken", key: new Uint8Array(32) },
  publishedKeys: () => [],
  attest: () => "",
  verifyCaller: (token: string) =>
    token === "good" ? Effect.succeed(claims) : token === "expired" ? new AttestationExpired() : new InvalidAttestation()
} satisfies AuthService

/** A registry that answers `placement` only, and records the keys it was asked. */
const placedAs = (answer: Effect.Effect<PlacementView, NotPlaced | RegistryUnavailable>) => {
  const asked: Array<PlacementKey> = []
  const registry = {
    placement: (key: PlacementKey) => {
      asked.push(key)
      return answer
    }
  } as Pick<RegistryService, "placement"> as RegistryService
  return { registry, asked }
}

const tagOf = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.result(effect), (result) => (Result.isFailure(result) ? result.failure._tag : "succeeded"))

describe("step 2, attestation: Pinboard-Caller", () => {
  it.effect("no Pinboard-Caller: a request from outside, the registry not asked", () =>
    Effect.gen(function* () {
      const { registry, asked } = placedAs(Effect.succeed(view()))
      expect(yield* readCaller(auth, registry, { authorization: "Bearer x" })).toBeUndefined()
      expect(asked).toEqual([])
    })
  )

  it.effect("a verified token whose instance is live at that epoch on that worker: the caller, asked by env, namespace and id", () =>
    Effect.gen(function* () {
      const { registry, asked } = placedAs(Effect.succeed(view()))
      expect(yield* readCaller(auth, registry, { "pinboard-caller": "good" })).toEqual(claims)
      expect(asked).toEqual([{ env: "prod", namespace: "/rooms", id: "r1" }])
    })
  )

  it.effect("a repeated Pinboard-Caller or a token that does not verify: 401 invalid attestation; past its exp: 401 attestation expired", () =>
    Effect.gen(function* () {
      const { registry, asked } = placedAs(Effect.succeed(view()))
      expect(yield* tagOf(readCaller(auth, registry, { "pinboard-caller": ["good", "good"] as unknown as string }))).toBe("InvalidAttestation")
      expect(yield* tagOf(readCaller(auth, registry, { "pinboard-caller": "forged" }))).toBe("InvalidAttestation")
      expect(yield* tagOf(readCaller(auth, registry, { "pinboard-caller": "expired" }))).toBe("AttestationExpired")
      expect(asked).toEqual([])
    })
  )

  it.effect("the instance no longer placed there: 401 stale attestation (not placed, lapsed, another worker, another epoch)", () =>
    Effect.gen(function* () {
      const answers = [new NotPlaced(), Effect.succeed(view({ live: false })), Effect.succeed(view({ worker: "w2" })), Effect.succeed(view({ epoch: "18" }))]
      for (const answer of answers) {
        expect(yield* tagOf(readCaller(auth, placedAs(answer).registry, { "pinboard-caller": "good" }))).toBe("StaleAttestation")
      }
    })
  )

  it.effect("a registry that does not answer: 503 registry unavailable, not a stale attestation", () =>
    Effect.gen(function* () {
      const { registry } = placedAs(new RegistryUnavailable({}))
      expect(yield* tagOf(readCaller(auth, registry, { "pinboard-caller": "good" }))).toBe("RegistryUnavailable")
    })
  )
})

describe("step 3, depth", () => {
  it.effect("from outside: depth 0; from an instance: one deeper than the request it serves", () =>
    Effect.gen(function* () {
      expect(yield* depthOf(undefined)).toBe(0)
      expect(yield* depthOf({ ...claims, depth: 0 })).toBe(1)
      expect(yield* depthOf({ ...claims, depth: 7 })).toBe(8)
    })
  )

  it.effect("at most 50: a call at depth 50 goes through, one deeper is 508 depth exceeded", () =>
    Effect.gen(function* () {
      expect(MAX_DEPTH).toBe(50)
      expect(yield* depthOf({ ...claims, depth: 49 })).toBe(50)
      expect(yield* tagOf(depthOf({ ...claims, depth: 50 }))).toBe("DepthExceeded")
      expect(yield* tagOf(depthOf({ ...claims, depth: 51 }))).toBe("DepthExceeded")
    })
  )
})

/** A provider that accepts only `accepts`, naming `subject`, and counts its calls. */
const provider = (accepts: string, subject: string, scopes: ReadonlyArray<string> = []) => {
  const seen: Array<string> = []
  const check: Provider = (credential) => {
    seen.push(credential)
    return Effect.succeed(credential === accepts ? Option.some({ subject, scopes }) : Option.none())
  }
  return { check, seen }
}

const rule = (namespace: string, fields: Omit<NamespaceRule, "namespace">, providers: ReadonlyArray<readonly [string, Provider]> = []): CompiledRule =>
  compileRule({ namespace, ...fields }, new Map(providers))

const rulesOf = (...rules: ReadonlyArray<CompiledRule>) => new Map(rules.map((r) => [r.namespace, r] as const))

describe("step 4, the data-plane rule", () => {
  it.effect("no rules configured: open, no rule and no principal", () =>
    Effect.gen(function* () {
      expect(yield* admitByRule(undefined, "/threads", { authorization: "Bearer x" }, undefined)).toEqual({ rule: undefined, principal: undefined })
    })
  )

  it.effect("no rule for the namespace and no *: 403 namespace not allowed", () =>
    Effect.gen(function* () {
      const rules = rulesOf(rule("/threads", { auth: "none" }))
      expect(yield* tagOf(admitByRule(rules, "/rooms", {}, undefined))).toBe("NamespaceNotAllowed")
      const star = rule("*", { auth: "none" })
      expect((yield* admitByRule(rulesOf(star), "/rooms", {}, undefined)).rule).toBe(star)
    })
  )

  it.effect("auth none: admitted without looking at the credential", () =>
    Effect.gen(function* () {
      const key = provider("k1", "alice")
      const open = rule("/threads", { auth: "none" }, [["keys", key.check]])
      expect(yield* admitByRule(rulesOf(open), "/threads", { authorization: "Bearer k1" }, undefined)).toEqual({ rule: open, principal: undefined })
      expect(key.seen).toEqual([])
    })
  )

  it.effect("no credential: required is 401 authentication required; optional admits without a principal", () =>
    Effect.gen(function* () {
      const key = provider("k1", "alice")
      const required = rule("/threads", { auth: "required" }, [["keys", key.check]])
      const optional = rule("/rooms", { auth: "optional" }, [["keys", key.check]])
      const rules = rulesOf(required, optional)
      expect(yield* tagOf(admitByRule(rules, "/threads", {}, undefined))).toBe("AuthenticationRequired")
      expect(yield* tagOf(admitByRule(rules, "/threads", { authorization: "Bearer " }, undefined))).toBe("AuthenticationRequired")
      expect(yield* admitByRule(rules, "/rooms", {}, undefined)).toEqual({ rule: optional, principal: undefined })
      expect(key.seen).toEqual([])
    })
  )

  it.effect("a credential is checked by the rule's providers in order; the first that accepts names the principal", () =>
    Effect.gen(function* () {
      const first = provider("k1", "alice", ["read"])
      const second = provider("k2", "bob")
      const both = rule("/threads", { auth: "optional", providers: ["first", "second"] }, [
        ["first", first.check],
        ["second", second.check]
      ])
      const rules = rulesOf(both)
      expect(yield* admitByRule(rules, "/threads", { authorization: "Bearer k1" }, undefined)).toEqual({
        rule: both,
        principal: { subject: "alice", scopes: ["read"] }
      })
      expect(second.seen).toEqual([])
      expect(yield* admitByRule(rules, "/threads", { authorization: "Bearer k2" }, undefined)).toEqual({
        rule: both,
        principal: { subject: "bob", scopes: [] }
      })
      expect(first.seen).toEqual(["k1", "k2"])
      expect(second.seen).toEqual(["k2"])
    })
  )

  it.effect("a credential no provider accepts: 401 invalid credential, optional or required, none left untried", () =>
    Effect.gen(function* () {
      const first = provider("k1", "alice")
      const second = provider("k2", "bob")
      for (const auth of ["optional", "required"] as const) {
        const rules = rulesOf(rule("/threads", { auth }, [["first", first.check], ["second", second.check]]))
        expect(yield* tagOf(admitByRule(rules, "/threads", { authorization: "Bearer k3" }, undefined))).toBe("InvalidCredential")
      }
      expect(first.seen).toEqual(["k3", "k3"])
      expect(second.seen).toEqual(["k3", "k3"])
      const none = rulesOf(rule("/threads", { auth: "required", providers: [] }))
      expect(yield* tagOf(admitByRule(none, "/threads", { authorization: "Bearer k1" }, undefined))).toBe("InvalidCredential")
    })
  )

  it.effect("a call from an instance skips the credential and keeps the rule for the caller scope; no rule is no refusal here", () =>
    Effect.gen(function* () {
      const key = provider("k1", "alice")
      const required = rule("/threads", { auth: "required" }, [["keys", key.check]])
      const rules = rulesOf(required)
      expect(yield* admitByRule(rules, "/threads", {}, claims)).toEqual({ rule: required, principal: undefined })
      expect(yield* admitByRule(rules, "/threads", { authorization: "Bearer k1" }, claims)).toEqual({ rule: required, principal: undefined })
      expect(yield* admitByRule(rules, "/rooms", {}, claims)).toEqual({ rule: undefined, principal: undefined })
      expect(key.seen).toEqual([])
    })
  )
})

describe("step 6, caller scope", () => {
  const scoped = rule("/threads", { auth: "optional", scopes: ["read", "write"], callers: ["/rooms"] })
  const alice = (scopes: ReadonlyArray<string>) => ({ subject: "alice", scopes })

  it.effect("no rule (open): admitted", () =>
    Effect.gen(function* () {
      expect(yield* tagOf(checkCallerScope({ rule: undefined, principal: undefined }, undefined))).toBe("succeeded")
      expect(yield* tagOf(checkCallerScope({ rule: undefined, principal: undefined }, { ...claims, namespace: "/other" }))).toBe("succeeded")
    })
  )

  it.effect("a principal must hold every scope of the rule; none held, or no principal, is 403 insufficient scope", () =>
    Effect.gen(function* () {
      expect(yield* tagOf(checkCallerScope({ rule: scoped, principal: alice(["write", "read", "admin"]) }, undefined))).toBe("succeeded")
      expect(yield* tagOf(checkCallerScope({ rule: scoped, principal: alice(["read"]) }, undefined))).toBe("InsufficientScope")
      expect(yield* tagOf(checkCallerScope({ rule: scoped, principal: undefined }, undefined))).toBe("InsufficientScope")
      const unscoped = rule("/threads", { auth: "optional" })
      expect(yield* tagOf(checkCallerScope({ rule: unscoped, principal: undefined }, undefined))).toBe("succeeded")
    })
  )

  it.effect("an attested caller: its namespace must be among the rule's callers; the scopes are not applied", () =>
    Effect.gen(function* () {
      expect(yield* tagOf(checkCallerScope({ rule: scoped, principal: undefined }, claims))).toBe("succeeded")
      expect(yield* tagOf(checkCallerScope({ rule: scoped, principal: undefined }, { ...claims, namespace: "/threads" }))).toBe("InsufficientScope")
      const anyCaller = rule("/threads", { auth: "optional", scopes: ["read"] })
      expect(yield* tagOf(checkCallerScope({ rule: anyCaller, principal: undefined }, { ...claims, namespace: "/other" }))).toBe("succeeded")
    })
  )
})
