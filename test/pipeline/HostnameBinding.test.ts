// Step 5's hostname (docs/proxy.md "Hostname-aware mode"): the Host
// header (or an absolute-form target's authority) lowercased, its port stripped; none is 400
// missing Host header; outside the mode, nothing is read.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import { bindingOf, hostnameOf } from "../../src/pipeline/steps/HostnameBinding.js"

describe("the request's hostname", () => {
  it("is the Host header, lowercased, without its port", () => {
    expect(hostnameOf("Docs.Example.COM")).toBe("docs.example.com")
    expect(hostnameOf("a.example:8080")).toBe("a.example")
    expect(hostnameOf("a.example:")).toBe("a.example")
    expect(hostnameOf("[::1]:8080")).toBe("[::1]")
    expect(hostnameOf("10.0.0.1:80")).toBe("10.0.0.1")
    expect(hostnameOf(" A.example:80 ")).toBe("a.example")
  })

  it("only a numeric port at the end is stripped", () => {
    expect(hostnameOf("a.example:http")).toBe("a.example:http")
    expect(hostnameOf("a.example:80:90")).toBe("a.example:80")
    expect(hostnameOf("[::1]")).toBe("[::1]")
  })

  it("is missing when Host is absent or empty", () => {
    expect(hostnameOf(undefined)).toBeUndefined()
    expect(hostnameOf("")).toBeUndefined()
    expect(hostnameOf("  ")).toBeUndefined()
    expect(hostnameOf(":8080")).toBeUndefined()
  })

  it.effect("in hostname-aware mode: the hostname, or 400 missing Host header", () =>
    Effect.gen(function* () {
      expect(yield* bindingOf("/docs/x", { host: "A.example:443" }, true)).toBe("a.example")
      const missing = yield* Effect.result(bindingOf("/docs/x", {}, true))
      expect(Result.isFailure(missing) && missing.failure.reply).toMatchObject({ status: 400 })
    })
  )

  it.effect("an absolute-form target names the hostname in place of Host (RFC 9112 3.2.2)", () =>
    Effect.gen(function* () {
      expect(yield* bindingOf("http://B.example/docs/x", { host: "a.example" }, true)).toBe("b.example")
      expect(yield* bindingOf("http://user:pw@b.example:8080/docs/x?q=1", { host: "a.example" }, true)).toBe("b.example")
      expect(yield* bindingOf("https://[::1]:8443/docs/x", {}, true)).toBe("[::1]")
      // No Host is needed beside it (HTTP/1.0); an empty authority names no hostname.
      expect(yield* bindingOf("http://b.example/docs/x", {}, true)).toBe("b.example")
      const empty = yield* Effect.result(bindingOf("http:///docs/x", { host: "a.example" }, true))
      expect(Result.isFailure(empty) && empty.failure._tag).toBe("MissingHost")
      expect(yield* bindingOf("http://b.example/docs/x", { host: "a.example" }, false)).toBe("")
    })
  )

  it.effect("outside it: no hostname, whatever Host says", () =>
    Effect.gen(function* () {
      expect(yield* bindingOf("/docs/x", {}, false)).toBe("")
      expect(yield* bindingOf("/docs/x", { host: "a.example" }, false)).toBe("")
    })
  )
})
