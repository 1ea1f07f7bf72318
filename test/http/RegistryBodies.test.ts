// The registry API's field problems, word for word as docs/registry-api.md "Validation" gives
// them: the first problem only, unknown fields first, a missing one "is required", a value of
// the wrong type told as a bad value of the right one, array items as namespaces[i].
import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { decodeBody, decodeParam, EnvName, HeartbeatBody, HostnameRegisterBody, PageLimit, RegisterBody, TagBody } from "../../src/http/RegistryBodies.js"

const register = { worker: "w1", advertiseUrl: "http://10.0.0.1:9000/", namespaces: ["/threads"], headroom: 1 }
const tag = { namespace: "/threads", id: "t1", epoch: "1", tag: "x" }

const problemOf = <A>(decoded: Result.Result<A, { readonly problem: string }>): string | undefined =>
  Result.isFailure(decoded) ? decoded.failure.problem : undefined

describe("registry API bodies", () => {
  it.each<[string, unknown, string]>([
    ["an unknown field, before a missing one", { surprise: 1 }, "surprise: is not a known field"],
    ["__proto__", JSON.parse(`{"__proto__":{"x":1},${JSON.stringify(register).slice(1)}`), "__proto__: is not a known field"],
    ["a missing field", { advertiseUrl: register.advertiseUrl, namespaces: register.namespaces, headroom: 1 }, "worker: is required"],
    ["a bad worker", { ...register, worker: "w main" }, "worker: expected 1-128 characters of [A-Za-z0-9._~-]"],
    ["a worker of the wrong type", { ...register, worker: 5 }, "worker: expected 1-128 characters of [A-Za-z0-9._~-]"],
    ["headroom as a string", { ...register, headroom: "2" }, "headroom: expected a finite number >= 0"],
    ["headroom 1e999", { ...register, headroom: Infinity }, "headroom: expected a finite number >= 0"],
    ["headroom -1", { ...register, headroom: -1 }, "headroom: expected a finite number >= 0"],
    ["draining null", { ...register, draining: null }, "draining: expected true or false"],
    ["a bad epoch", { ...register, epoch: "1.5" }, "epoch: expected an epoch: a decimal string"],
    ["an advertiseUrl with a query", { ...register, advertiseUrl: "http://x/?q=1" }, "advertiseUrl: expected an absolute http: or https: URL without query or fragment"],
    ["namespaces not a list", { ...register, namespaces: "/threads" }, "namespaces: expected a list of namespaces"],
    ["namespaces empty", { ...register, namespaces: [] }, "namespaces: expected a list of 1-1024 namespaces"],
    ["the second namespace bad", { ...register, namespaces: ["/threads", "/"] }, 'namespaces[1]: expected "/" followed by 1-128 characters of [A-Za-z0-9._~-]']
  ])("register: %s", (_, body, problem) => {
    expect(problemOf(decodeBody(RegisterBody, body))).toBe(problem)
  })

  it("hostname-aware registrations are reported by entry and field", () => {
    const withEntry = (entry: unknown) => problemOf(decodeBody(HostnameRegisterBody, { ...register, namespaces: [entry] }))
    expect(withEntry("/docs")).toBe('namespaces[0]: expected an object {"namespace","hostname","env"}')
    expect(withEntry({ namespace: "/docs", hostname: "a.example:8080", env: "prod" })).toBe(
      "namespaces[0].hostname: expected a hostname: 1-253 characters of [A-Za-z0-9.-], without a port"
    )
    expect(withEntry({ namespace: "/docs", hostname: "a.example" })).toBe("namespaces[0].env: is required")
  })

  it("heartbeat and tag bodies, and a body that is no object", () => {
    expect(problemOf(decodeBody(HeartbeatBody, { headroom: 1 }))).toBe("incarnation: is required")
    expect(problemOf(decodeBody(HeartbeatBody, { incarnation: "i", headroom: 1, degraded: "true" }))).toBe("degraded: expected true or false")
    expect(problemOf(decodeBody(TagBody, { ...tag, tag: "€".repeat(342) }))).toBe("tag: expected well-formed text of at most 1 KiB")
    expect(problemOf(decodeBody(TagBody, { ...tag, env: null }))).toBe("env: expected 0-128 characters of [A-Za-z0-9._~-]")
    expect(problemOf(decodeBody(RegisterBody, []))).toBe("body: expected a JSON object")
    expect(decodeBody(TagBody, tag)).toEqual(Result.succeed(tag))
  })

  it("path and query parameters under their own names", () => {
    expect(problemOf(decodeParam(PageLimit, "limit", "01"))).toBe("limit: expected an integer from 1 to 1000")
    expect(problemOf(decodeParam(EnvName, "env", "a b"))).toBe("env: expected 0-128 characters of [A-Za-z0-9._~-]")
    expect(problemOf(decodeParam(EnvName, "incarnation", null))).toBe("incarnation: is required")
    expect(decodeParam(PageLimit, "limit", "1000")).toEqual(Result.succeed("1000"))
  })
})
