// What a worker credential covers (docs/deploy.md "Credentials"): worker ids exact or by prefix,
// registrations by namespace, env and hostname (`*` any), placements by namespace and env.
import { describe, expect, it } from "@effect/vitest"
import { coversPlacement, coversRegistration, grantOf } from "../../src/auth/WorkerGrant.js"
import { ownerGrantCovers as coversWorker } from "../../src/registry/Domain.js"

const entry = (workers: Array<string>, namespaces = [{ namespace: "/threads", hostname: "", env: "" }]) => ({ workers, namespaces })

describe("a worker grant", () => {
  it("covers worker ids exactly or by prefix", () => {
    const { owners } = grantOf([entry(["chat-*", "lobby"])], undefined)
    expect(coversWorker(owners, "chat-1")).toBe(true)
    expect(coversWorker(owners, "chat-")).toBe(true)
    expect(coversWorker(owners, "lobby")).toBe(true)
    expect(coversWorker(owners, "lobby-2")).toBe(false)
    expect(coversWorker(owners, "billing-1")).toBe(false)
    expect(coversWorker(owners, "Chat-1")).toBe(false)
  })

  it("puts a JWT's subject for {sub}, and grants no {sub} pattern without one", () => {
    expect(grantOf([entry(["{sub}", "pool-{sub}-*"])], "docs-7").owners).toEqual({ exact: ["docs-7"], prefixes: ["pool-docs-7-"] })
    expect(grantOf([entry(["{sub}", "fixed"])], undefined).owners).toEqual({ exact: ["fixed"], prefixes: [] })
  })

  it("unites the grants of several entries", () => {
    const grant = grantOf([entry(["a"]), entry(["b-*"], [{ namespace: "/docs", hostname: "", env: "" }])], undefined)
    expect(grant.owners).toEqual({ exact: ["a"], prefixes: ["b-"] })
    expect(grant.namespaces.map((n) => n.namespace)).toEqual(["/threads", "/docs"])
  })

  it("covers registrations by namespace, env and hostname", () => {
    const plain = grantOf([entry(["w"])], undefined)
    expect(coversRegistration(plain, { namespace: "/threads", hostname: "", env: "" })).toBe(true)
    expect(coversRegistration(plain, { namespace: "/billing", hostname: "", env: "" })).toBe(false)
    const bound = grantOf([entry(["w"], [{ namespace: "/docs", hostname: "*", env: "prod" }, { namespace: "/chat", hostname: "a.example", env: "prod" }])], undefined)
    expect(coversRegistration(bound, { namespace: "/docs", hostname: "b.example", env: "prod" })).toBe(true)
    expect(coversRegistration(bound, { namespace: "/docs", hostname: "b.example", env: "staging" })).toBe(false)
    expect(coversRegistration(bound, { namespace: "/chat", hostname: "a.example", env: "prod" })).toBe(true)
    expect(coversRegistration(bound, { namespace: "/chat", hostname: "b.example", env: "prod" })).toBe(false)
  })

  it("covers placements by namespace and env, whichever hostname", () => {
    const bound = grantOf([entry(["w"], [{ namespace: "/chat", hostname: "a.example", env: "prod" }])], undefined)
    expect(coversPlacement(bound, { namespace: "/chat", env: "prod", id: "x" })).toBe(true)
    expect(coversPlacement(bound, { namespace: "/chat", env: "", id: "x" })).toBe(false)
    expect(coversPlacement(bound, { namespace: "/docs", env: "prod", id: "x" })).toBe(false)
  })
})
