// Step 5's hostname (routing.md "Hostname-aware mode", DESIGN 11 "Hostname claims"): the Host
// header lowercased, its port stripped; none is 400 missing Host header; outside the mode,
// nothing is read.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { bindingOf, hostnameOf } from "../../src/pipeline/steps/HostnameBinding.js"

describe("the request's hostname", () => {
  it("is the Host header, lowercased, without its port", () => {
    expect(hostnameOf("Docs.Example.COM")).toBe("docs.example.com")
    expect(hostnameOf("a.example:8080")).toBe("a.example")
    expect(hostnameOf("a.example:")).toBe("a.example")
    expect(hostnameOf("[::1]:8080")).toBe("[::1]")
    expect(hostnameOf("10.0.0.1:80")).toBe("10.0.0.1")
  })

  it("is missing when Host is absent or empty", () => {
    expect(hostnameOf(undefined)).toBeUndefined()
    expect(hostnameOf("")).toBeUndefined()
    expect(hostnameOf("  ")).toBeUndefined()
    expect(hostnameOf(":8080")).toBeUndefined()
  })

  it.effect("in hostname-aware mode: the hostname, or 400 missing Host header", () =>
    Effect.gen(function* () {
      expect(yield* bindingOf({ host: "A.example:443" }, true)).toBe("a.example")
      const missing = yield* Effect.either(bindingOf({}, true))
      expect(Either.isLeft(missing) && missing.left.reply).toMatchObject({ status: 400 })
    })
  )

  it.effect("outside it: no hostname, whatever Host says", () =>
    Effect.gen(function* () {
      expect(yield* bindingOf({}, false)).toBe("")
      expect(yield* bindingOf({ host: "a.example" }, false)).toBe("")
    })
  )
})
