import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Result } from "effect"
import {
  absoluteFormAuthority,
  type Address,
  type AddressError,
  formatAddress,
  ID_PATTERN,
  idError,
  isValidId,
  isValidNamespace,
  MAX_ID_LENGTH,
  NAMESPACE_PATTERN,
  parseAddress,
  pathOf
} from "../src/Address.js"
import { APPLICATION_JSON, TEXT_PLAIN } from "../src/Errors.js"
import * as fc from "./support/Arbitraries.js"

const parsed = (url: string): Address => {
  const result = parseAddress(url)
  if (Result.isFailure(result)) throw new Error(`expected ${url} to parse, got ${result.failure._tag}`)
  return result.success
}

const rejected = (url: string): AddressError => {
  const result = parseAddress(url)
  if (Result.isSuccess(result)) throw new Error(`expected ${url} to be rejected, got ${JSON.stringify(result.success)}`)
  return result.failure
}

const tagOf = (url: string): string => rejected(url)._tag

const ALLOWED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-"
const allowedChar = fc.constantFrom(...ALLOWED.split(""))
const nameOf = (max: number) => fc.array(allowedChar, { minLength: 1, maxLength: max }).pipe(Arbitrary.map((cs) => cs.join("")))

const namespaceArb = nameOf(128).pipe(Arbitrary.map((n) => `/${n}`))
const idArb = fc.oneof(nameOf(16), nameOf(MAX_ID_LENGTH))
// Raw bytes a client may send after the id: anything but `?` (which starts the query).
const restArb = fc.oneof(
  fc.constant(""),
  fc.string({ unit: "binary" }).pipe(Arbitrary.map((s) => `/${s.replaceAll("?", "%3F")}`)),
  fc.array(fc.constantFrom("a", "/", "%2F", "%", "..", ".", "~", " ", "#", "é")).pipe(Arbitrary.map((p) => `/${p.join("")}`))
)
const queryArb = fc.oneof(
  fc.constant(""),
  fc.string({ unit: "binary" }).pipe(Arbitrary.map((s) => `?${s}`)),
  fc.array(fc.constantFrom("/", "?", "=", "&", "%2F", "a", "#")).pipe(Arbitrary.map((p) => `?${p.join("")}`))
)

describe("parseAddress", () => {
  it("splits the example of docs/proxy.md", () => {
    expect(parsed("/threads/t_8f2a/stream?x=1")).toStrictEqual({
      namespace: "/threads",
      id: "t_8f2a",
      rest: "/stream",
      query: "?x=1"
    })
  })

  it("allows no rest and no query", () => {
    expect(parsed("/threads/t_8f2a")).toStrictEqual({ namespace: "/threads", id: "t_8f2a", rest: "", query: "" })
    expect(parsed("/threads/t_8f2a/")).toStrictEqual({ namespace: "/threads", id: "t_8f2a", rest: "/", query: "" })
    expect(parsed("/threads/t_8f2a?")).toStrictEqual({ namespace: "/threads", id: "t_8f2a", rest: "", query: "?" })
  })

  it("keeps rest and query byte for byte", () => {
    expect(parsed("/ns/id/a//b/%2F/../c?x=%2F&y=/z?w#f")).toStrictEqual({
      namespace: "/ns",
      id: "id",
      rest: "/a//b/%2F/../c",
      query: "?x=%2F&y=/z?w#f"
    })
  })

  it("takes the query from the first ?, even where it looks like a path", () => {
    expect(parsed("/ns/id?/other/path")).toStrictEqual({ namespace: "/ns", id: "id", rest: "", query: "?/other/path" })
    expect(tagOf("/ns?/id")).toBe("UnknownNamespace")
    expect(tagOf("/ns/?id")).toBe("UnknownNamespace")
  })

  it("accepts every id character and is case-sensitive", () => {
    expect(parsed(`/Ns/${ALLOWED}`)).toMatchObject({ namespace: "/Ns", id: ALLOWED })
    expect(parsed("/threads/ABC").id).not.toBe(parsed("/threads/abc").id)
    expect(parsed("/Threads/x").namespace).toBe("/Threads")
    expect(parsed("/./..")).toMatchObject({ namespace: "/.", id: ".." })
    expect(parsed("/../.")).toMatchObject({ namespace: "/..", id: "." })
  })

  it("accepts absolute-form targets by dropping scheme and authority", () => {
    expect(parsed("http://localhost:8080/threads/t_8f2a/stream?x=1")).toStrictEqual({
      namespace: "/threads",
      id: "t_8f2a",
      rest: "/stream",
      query: "?x=1"
    })
    expect(parsed("HTTPS://user@example.com/ns/id")).toMatchObject({ namespace: "/ns", id: "id" })
    expect(tagOf("http://host")).toBe("UnknownNamespace")
    expect(tagOf("http://host?/ns/id")).toBe("UnknownNamespace")
    expect(tagOf("http://host/ns")).toBe("UnknownNamespace")
    expect(tagOf("http://host/ns//x")).toBe("IdEmpty")
  })

  it("an absolute-form target's authority is its host and port, without userinfo; other forms have none", () => {
    expect(absoluteFormAuthority("http://B.example:8080/ns/id?x=1")).toBe("B.example:8080")
    expect(absoluteFormAuthority("https://user:pw@b.example/ns/id")).toBe("b.example")
    expect(absoluteFormAuthority("http://[::1]:80?q")).toBe("[::1]:80")
    expect(absoluteFormAuthority("http://b.example")).toBe("b.example")
    expect(absoluteFormAuthority("http:///ns/id")).toBe("")
    expect(absoluteFormAuthority("/ns/id")).toBeUndefined()
    expect(absoluteFormAuthority("*")).toBeUndefined()
    expect(absoluteFormAuthority("b.example:443")).toBeUndefined()
  })

  it("an absolute-form scheme is a letter, then letters, digits, +, - and . (RFC 3986 3.1), in either case", () => {
    for (const scheme of ["h", "A", "z", "Z", "a0", "a9", "a+b", "a-b", "a.b", "Az09+-."]) {
      expect(parsed(`${scheme}://host/ns/id`), scheme).toStrictEqual({ namespace: "/ns", id: "id", rest: "", query: "" })
      expect(absoluteFormAuthority(`${scheme}://host:1/ns/id`), scheme).toBe("host:1")
    }
    // Just outside each range: @ [ ` { before and after the letters, / and : around the digits, and a digit first.
    for (const scheme of ["@", "[", "`", "{", "a@", "a[", "a`", "a{", "a/", "a,", "a*", "0a", "+a", "-a", ".a"]) {
      expect(tagOf(`${scheme}://host/ns/id`), scheme).toBe("UnknownNamespace")
      expect(absoluteFormAuthority(`${scheme}://host/ns/id`), scheme).toBeUndefined()
    }
    for (const url of ["http:/host/ns/id", "http:host/ns/id", "http:x/host/ns/id", "http//host/ns/id", "://host/ns/id"]) {
      expect(tagOf(url), url).toBe("UnknownNamespace")
      expect(absoluteFormAuthority(url), url).toBeUndefined()
    }
  })

  it("an absolute-form authority ends at the path, the query or the fragment", () => {
    expect(absoluteFormAuthority("http://b.example#f/ns/id")).toBe("b.example")
    expect(absoluteFormAuthority("http://b.example?q/ns/id")).toBe("b.example")
    expect(absoluteFormAuthority("http://a@b@c.example:1/ns")).toBe("c.example:1")
    expect(tagOf("http://b.example#/ns/id")).toBe("UnknownNamespace")
    expect(tagOf("http://b.example#x/ns/id")).toBe("UnknownNamespace")
    expect(tagOf("http://b.example?x/ns/id")).toBe("UnknownNamespace")
    // Neither origin-form nor absolute-form: no path to read.
    expect(tagOf("example.com/ns/id")).toBe("UnknownNamespace")
    expect(tagOf("a/b/c")).toBe("UnknownNamespace")
  })

  describe("no id segment: unknown namespace", () => {
    for (const url of ["/ns", "/ns/", "/ns?x=1", "/ns/?x=1", "/", "", "*", "//", "example.com:443", "ns/id", "1http://h/ns/id"]) {
      it(JSON.stringify(url), () => {
        expect(tagOf(url)).toBe("UnknownNamespace")
      })
    }
  })

  it("an empty id segment is IdEmpty", () => {
    expect(tagOf("/ns//x")).toBe("IdEmpty")
    expect(tagOf("/ns//")).toBe("IdEmpty")
    expect(tagOf("/ns//?x")).toBe("IdEmpty")
  })

  it("limits ids to 256 characters", () => {
    expect(parsed(`/ns/${"a".repeat(256)}/r`).id).toHaveLength(256)
    expect(tagOf(`/ns/${"a".repeat(257)}`)).toBe("IdTooLong")
    expect(tagOf(`/ns/${"a".repeat(257)}/r?q`)).toBe("IdTooLong")
  })

  it("rejects characters outside [A-Za-z0-9._~-], % included (ids are not decoded)", () => {
    for (const id of ["\u0080", "a\u00ff", "a\u0100", "a\u007f", "a,", "a:", "a@", "a[", "a`", "a{", "a}", "a^", "a%20b", "%41", "a b", "a+b", "a:b", "a@b", "a#b", "é", "a\u0000", "a!", "a*", "a=b", "a;b", "\u{1F600}"]) {
      expect(tagOf(`/ns/${id}/rest`), id).toBe("IdBadCharacters")
    }
  })

  it("checks empty, then length, then characters", () => {
    expect(tagOf(`/ns/${"%".repeat(257)}`)).toBe("IdTooLong")
    expect(tagOf(`/ns/${"%".repeat(256)}`)).toBe("IdBadCharacters")
  })

  it("checks the id before the namespace name", () => {
    // A first segment no worker could register is only reported once the id is valid.
    expect(tagOf("/bad%ns//x")).toBe("IdEmpty")
    expect(tagOf(`/${"n".repeat(129)}/${"a".repeat(257)}`)).toBe("IdTooLong")
    expect(tagOf("//a%b")).toBe("IdBadCharacters")
    expect(tagOf("/bad%ns/x")).toBe("UnknownNamespace")
    expect(tagOf("//x")).toBe("UnknownNamespace")
    expect(tagOf(`/${"n".repeat(129)}/x`)).toBe("UnknownNamespace")
    expect(parsed(`/${"n".repeat(128)}/x`).namespace).toHaveLength(129)
  })

  it("replies exactly as docs/errors.md", () => {
    expect(rejected("/ns//x").reply).toStrictEqual({ status: 400, contentType: TEXT_PLAIN, body: "id must be non-empty" })
    expect(rejected(`/ns/${"a".repeat(257)}`).reply).toStrictEqual({
      status: 400,
      contentType: TEXT_PLAIN,
      body: "id must be at most 256 characters"
    })
    expect(rejected("/ns/a%20b").reply).toStrictEqual({
      status: 400,
      contentType: TEXT_PLAIN,
      body: "id must contain only [A-Za-z0-9._~-]"
    })
    expect(rejected("/ns").reply).toStrictEqual({
      status: 404,
      contentType: APPLICATION_JSON,
      body: `{"error":"unknown namespace"}`
    })
  })

  it.prop("round-trips valid addresses exactly", [namespaceArb, idArb, restArb, queryArb], ([namespace, id, rest, query]) => {
    const address: Address = { namespace, id, rest, query }
    const url = formatAddress(address)
    expect(url).toBe(namespace + "/" + id + rest + query)
    expect(parsed(url)).toStrictEqual(address)
    expect(parsed(`http://example.com:8080${url}`)).toStrictEqual(address)
  })

  it.prop(
    "rejects any id with a character outside the set",
    [
      nameOf(8),
      fc.string({ maxLength: 100, edgeCases: true }),
      fc.string({ minLength: 1, maxLength: 1, unit: "binary" }).pipe(Arbitrary.filter((bad) => !ALLOWED.includes(bad) && bad !== "/" && bad !== "?")),
      fc.string({ maxLength: 100, edgeCases: true })
    ],
    ([ns, before, bad, after]) => {
      const id = (before + bad + after).replace(/[/?]/g, "")
      // At most 100 + 2 + 100 UTF-16 units: always within the length limit.
      expect(id.length).toBeLessThanOrEqual(MAX_ID_LENGTH)
      expect(tagOf(`/${ns}/${id}/rest?q`)).toBe("IdBadCharacters")
      expect(idError(id)?._tag).toBe("IdBadCharacters")
      expect(isValidId(id)).toBe(false)
    }
  )

  it.prop("never throws, and a success reassembles the path", [fc.string({ unit: "binary", maxLength: 400 })], ([url]) => {
    const result = parseAddress(url)
    if (Result.isSuccess(result)) {
      const a = result.success
      if (url.startsWith("/")) expect(formatAddress(a)).toBe(url)
      else expect(url.endsWith(formatAddress(a))).toBe(true)
      expect(isValidNamespace(a.namespace)).toBe(true)
      expect(isValidId(a.id)).toBe(true)
      expect(a.rest === "" || a.rest.startsWith("/")).toBe(true)
      expect(a.query === "" || a.query.startsWith("?")).toBe(true)
      expect(a.rest.includes("?")).toBe(false)
    }
  })

  it.prop(
    "also never throws on path-shaped noise",
    [fc.array(fc.constantFrom("/", "?", "%", "a", "Z", "", ".", ":", "http://", "#", " "), { maxLength: 40 })],
    ([parts]) => {
      const url = parts.join("")
      const result = parseAddress(url)
      if (Result.isSuccess(result)) expect(url.endsWith(formatAddress(result.success))).toBe(true)
    }
  )
})

describe("id and namespace predicates", () => {
  it.prop("isValidId agrees with ID_PATTERN", [fc.oneof(idArb, fc.string({ maxLength: 300, unit: "binary" }))], ([id]) => {
    expect(isValidId(id)).toBe(ID_PATTERN.test(id))
    expect(idError(id) === undefined).toBe(ID_PATTERN.test(id))
  })

  it.prop(
    "isValidNamespace agrees with NAMESPACE_PATTERN",
    [fc.oneof(namespaceArb, fc.string({ maxLength: 140, unit: "binary" }))],
    ([ns]) => {
      expect(isValidNamespace(ns)).toBe(NAMESPACE_PATTERN.test(ns))
    }
  )

  it("a namespace is a slash and 1 to 128 characters of the id set", () => {
    expect(isValidNamespace("/")).toBe(false)
    expect(isValidNamespace("")).toBe(false)
    expect(isValidNamespace("/a")).toBe(true)
    expect(isValidNamespace(`/${"n".repeat(128)}`)).toBe(true)
    expect(isValidNamespace(`/${"n".repeat(129)}`)).toBe(false)
    expect(isValidNamespace("//a")).toBe(false)
    expect(isValidNamespace("/a\u0080")).toBe(false)
    expect(isValidId("\u0080")).toBe(false)
  })

  it("pathOf is everything before the first ?", () => {
    expect(pathOf("/threads/t_8f2a/stream?x=1?y")).toBe("/threads/t_8f2a/stream")
    expect(pathOf("/threads/t_8f2a")).toBe("/threads/t_8f2a")
    expect(pathOf("?x")).toBe("")
    expect(pathOf("/a/b?")).toBe("/a/b")
  })

  it("idError follows the check order", () => {
    expect(idError("")?._tag).toBe("IdEmpty")
    expect(idError("%".repeat(257))?._tag).toBe("IdTooLong")
    expect(idError("%")?._tag).toBe("IdBadCharacters")
    expect(idError("t_8f2a")).toBeUndefined()
    expect(isValidNamespace("threads")).toBe(false)
    expect(isValidNamespace("/threads")).toBe(true)
  })
})
