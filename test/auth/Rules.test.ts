// The pure rule decisions of docs/config.md "Data-plane auth": which rule applies, where the credential is, scopes
// and callers.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { Provider } from "../../src/auth/Providers.js"
import { admitsCaller, compileRule, credentialInCookie, credentialInHeader, holdsScopes, ruleFor } from "../../src/auth/Rules.js"
import * as fc from "../support/Arbitraries.js"

describe("ruleFor", () => {
  const rules = new Map([
    ["/threads", "threads rule"],
    ["*", "fallback"]
  ])

  it("the namespace's own rule, else *, else none", () => {
    expect(ruleFor(rules, "/threads")).toBe("threads rule")
    expect(ruleFor(rules, "/rooms")).toBe("fallback")
    expect(ruleFor(new Map([["/threads", 1]]), "/rooms")).toBeUndefined()
  })

  it("namespaces are case-sensitive", () => {
    expect(ruleFor(new Map([["/threads", 1]]), "/Threads")).toBeUndefined()
  })
})

describe("the credential", () => {
  it("from authorization by default, a Bearer prefix removed in any case", () => {
    const read = credentialInHeader("authorization")
    expect(read({ authorization: "Bearer abc.def" })).toBe("abc.def")
    expect(read({ authorization: "bearer abc" })).toBe("abc")
    expect(read({ authorization: "BEARER abc" })).toBe("abc")
    expect(read({ authorization: "Basic dXNlcg==" })).toBe("Basic dXNlcg==")
    expect(read({})).toBeUndefined()
    expect(read({ authorization: "" })).toBeUndefined()
    expect(read({ authorization: "Bearer " })).toBeUndefined()
  })

  it("Bearer is removed only as the value's first word", () => {
    const read = credentialInHeader("authorization")
    expect(read({ authorization: "Bearerabc" })).toBe("Bearerabc")
    expect(read({ authorization: "Token bearer abc" })).toBe("Token bearer abc")
    expect(read({ authorization: "Bearer bearer abc" })).toBe("bearer abc")
  })

  it("a repeated header: the first value", () => {
    expect(credentialInHeader("x-api-key")({ "x-api-key": ["k1", "k2"] as unknown as string })).toBe("k1")
  })

  it("from another header", () => {
    expect(credentialInHeader("x-api-key")({ "x-api-key": "k1", authorization: "Bearer other" })).toBe("k1")
  })

  it("from a cookie", () => {
    const read = credentialInCookie("session")
    expect(read({ cookie: "a=1; session=tok; b=2" })).toBe("tok")
    expect(read({ cookie: "sessions=no" })).toBeUndefined()
    expect(read({ cookie: "session=; b=2" })).toBeUndefined()
    expect(read({})).toBeUndefined()
  })
})

describe("scopes and callers", () => {
  it("every required scope must be held", async () => {
    await fc.assertProperty(fc.tuple(fc.array(fc.string({ edgeCases: true })), fc.array(fc.string({ edgeCases: true }))), ([required, held]) => {
      expect(holdsScopes(required, held)).toBe(required.every((s) => held.includes(s)))
      expect(holdsScopes(required, [...held, ...required])).toBe(true)
    })
    expect(holdsScopes([], [])).toBe(true)
    expect(holdsScopes(["a"], [])).toBe(false)
  })

  it("callers: absent admits every instance, * admits all, otherwise the listed namespaces", () => {
    expect(admitsCaller(undefined, "/rooms")).toBe(true)
    expect(admitsCaller(new Set(["*"]), "/rooms")).toBe(true)
    expect(admitsCaller(new Set(["/rooms"]), "/rooms")).toBe(true)
    expect(admitsCaller(new Set(["/rooms"]), "/threads")).toBe(false)
    expect(admitsCaller(new Set(), "/rooms")).toBe(false)
  })
})

describe("a compiled rule", () => {
  const named = (subject: string): Provider => (credential) => Effect.succeed(credential === subject ? Option.some({ subject, scopes: [] }) : Option.none())
  const providers = new Map([
    ["keys", named("k")],
    ["jwt", named("j")]
  ])

  it("keeps the namespace and auth; no providers listed: every provider, in the config's order; no scopes: none", () => {
    const rule = compileRule({ namespace: "/threads", auth: "required" }, providers)
    expect(rule).toMatchObject({ namespace: "/threads", auth: "required", scopes: [], callers: undefined })
    expect(rule.providers).toEqual([providers.get("keys"), providers.get("jwt")])
  })

  it("the listed providers in the listed order, the scopes and the callers as given", () => {
    const rule = compileRule({ namespace: "/threads", auth: "optional", providers: ["jwt"], scopes: ["read"], callers: ["/rooms", "*"] }, providers)
    expect(rule.providers).toEqual([providers.get("jwt")])
    expect(rule.scopes).toEqual(["read"])
    expect(rule.callers).toEqual(new Set(["/rooms", "*"]))
  })

  it("the credential: authorization by default, else the named header, else the named cookie", () => {
    const headers = { authorization: "Bearer a", "x-api-key": "h", cookie: "session=c" }
    expect(compileRule({ namespace: "*", auth: "required" }, providers).credentialIn(headers)).toBe("a")
    expect(compileRule({ namespace: "*", auth: "required", credential: { header: "x-api-key" } }, providers).credentialIn(headers)).toBe("h")
    expect(compileRule({ namespace: "*", auth: "required", credential: { cookie: "session" } }, providers).credentialIn(headers)).toBe("c")
  })
})
