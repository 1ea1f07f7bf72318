// The pure rule decisions of DESIGN 6: which rule applies, where the credential is, scopes
// and callers.
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { admitsCaller, credentialInCookie, credentialInHeader, holdsScopes, ruleFor } from "../../src/auth/Rules.js"

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
  })

  it("from another header", () => {
    expect(credentialInHeader("x-api-key")({ "x-api-key": "k1", authorization: "Bearer other" })).toBe("k1")
  })

  it("from a cookie", () => {
    const read = credentialInCookie("session")
    expect(read({ cookie: "a=1; session=tok; b=2" })).toBe("tok")
    expect(read({ cookie: "sessions=no" })).toBeUndefined()
    expect(read({})).toBeUndefined()
  })
})

describe("scopes and callers", () => {
  it("every required scope must be held", () => {
    fc.assert(
      fc.property(fc.array(fc.string()), fc.array(fc.string()), (required, held) => {
        expect(holdsScopes(required, held)).toBe(required.every((s) => held.includes(s)))
        expect(holdsScopes(required, [...held, ...required])).toBe(true)
      })
    )
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
