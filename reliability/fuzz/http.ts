// Generators of raw HTTP inputs: request lines, paths and ids, headers, bodies, clients that
// stop part-way, WebSocket upgrades, and byte-level mutations of well-formed requests.
import { createHash } from "node:crypto"
import { API_KEY } from "./fleet.js"
import {
  baseHeaders,
  checkEcho,
  echoRest,
  expectedLabels,
  expectLabels,
  headBytes,
  pooledId,
  readAll,
  requestBytes,
  utf8AsLatin1,
  type Credentials,
  type EchoCheck,
  type Input,
  type World
} from "./common.js"
import { ID_ALPHABET, TOKEN_ALPHABET, type Rng } from "../prng.js"
import { callerClaims, callerToken, userToken } from "./tokens.js"
import type { Part } from "./wire.js"

const sha256 = (data: Buffer): string => createHash("sha256").update(data).digest("hex")

/** Bytes node:http's parser may refuse in a request target: then a Node 400 is also right. */
const mayBeRefusedByNode = (target: string): boolean => /[^\x21-\x7e]|["<>\\^`{|}#]/.test(target)

/** The reference split of an origin-form target (docs: routing "Addressing"): namespace, id. */
export const splitTarget = (target: string): { namespace: string; id: string } | "no id" | "not origin-form" => {
  if (!target.startsWith("/")) return "not origin-form"
  const q = target.indexOf("?")
  const path = q < 0 ? target : target.slice(0, q)
  const second = path.indexOf("/", 1)
  if (second < 0 || second === path.length - 1) return "no id"
  const third = path.indexOf("/", second + 1)
  return { namespace: path.slice(0, second), id: path.slice(second + 1, third < 0 ? path.length : third) }
}

/** Expected labels of a well-formed GET-like request to `target`, with its echo check. */
const expectForTarget = (target: string, method: string, credentials: Credentials = {}, extra: EchoCheck = {}, headBytes = 0) => {
  const path = target.split("?")[0]!
  const sized = (labels: Array<string>) => {
    // Past node:http's 16 KiB head limit: Pinboard's Node refuses it, or, with the headers
    // Pinboard adds, the worker's Node does (its 431 relayed).
    if (headBytes > 16 * 1024 - 1024) labels.push("node 431", "worker 431")
    return labels
  }
  if (path === "/healthz" || path === "/readyz") return expectLabels(sized(method === "GET" || method === "HEAD" ? ["probe 200"] : ["MethodNotAllowed"]))
  if (path === "/registry" || path.startsWith("/registry/")) return expectLabels(sized(["InvalidDeploymentToken"]))
  const split = splitTarget(target)
  const labels = split === "no id" || split === "not origin-form" ? ["UnknownNamespace"] : expectedLabels(split.namespace, split.id, credentials)
  if (mayBeRefusedByNode(target)) labels.push("node 400")
  return expectLabels(sized(labels), method === "HEAD" ? undefined : { method, url: target, ...extra })
}

const METHODS_OK = ["GET", "GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"]
const METHODS_RARE = [
  "CONNECT", "PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK", "SEARCH", "PURGE", "REPORT",
  "MKACTIVITY", "CHECKOUT", "MERGE", "M-SEARCH", "NOTIFY", "SUBSCRIBE", "UNSUBSCRIBE", "LINK", "UNLINK", "SOURCE",
  "QUERY", "ACL", "BIND", "REBIND", "UNBIND", "MKCALENDAR"
]
const METHODS_BAD = ["get", "Get", "FOO", "", "G ET", "GET\0", "GET\t", "\x80GET", utf8AsLatin1("GÉT"), "X".repeat(300), "-", "GET/", "1GET"]

const VERSIONS_OK = ["HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.0"]
const VERSIONS_BAD = [
  "HTTP/0.9", "HTTP/2.0", "HTTP/2", "HTTP/1.2", "HTTP/1.10", "HTTP/9.9", "http/1.1", "HTTP/1", "HTTP/", "", "HTTP/1.1 x",
  "HTTP/1.1\t", "HTTPS/1.1", "ICE/1.0", "RTSP/1.0", "HTTP/1.1\0", "HTTP/01.1", "HTTP/1.1 ", " HTTP/1.1", "HTTP/3.0"
]

const ctl = (rng: Rng): string => String.fromCharCode(rng.pick([0, 1, 8, 9, 10, 11, 12, 13, 27, 31, 127]))

const insertAt = (rng: Rng, text: string, piece: string): string => {
  const at = rng.int(text.length + 1)
  return text.slice(0, at) + piece + text.slice(at)
}

/** Targets, some well-formed, most odd: %-encodings, absolute-form, `*`, long, CTLs, unicode. */
const oddTarget = (rng: Rng, world: World): string => {
  const id = pooledId(rng)
  const base = `/open/${id}${echoRest(rng)}`
  const hex = () => rng.chars(2, "0123456789abcdefABCDEFgz")
  return rng.pick<() => string>([
    () => base,
    () => `/open/${id}%${hex()}/echo`,
    () => `/open/%${hex()}%${hex()}/echo`,
    () => `/open/a%/x`,
    () => `/open/${id}/%zz%%`,
    () => `/%6Fpen/${id}/echo`,
    () => `/open%2F${id}/echo`,
    () => `http://${world.host}/open/${id}/echo`,
    () => `HTTP://x/open/${id}/echo?y=1`,
    () => `https://evil.example/open/${id}/echo`,
    () => `http://${world.host}`,
    () => `http://h?x=/open/a/b`,
    () => `http:/open/${id}`,
    () => `ftp://h/open/${id}/echo`,
    () => `${world.host}`,
    () => "*",
    () => "**",
    () => "/*",
    () => "",
    () => `/open/${"a".repeat(rng.range(200, 3000))}/echo`,
    () => `/open/${id}/${"x".repeat(rng.range(1000, 15000))}`,
    () => `/open/${id}/echo?${"q".repeat(rng.range(1000, 20000))}`,
    () => insertAt(rng, base, ctl(rng)),
    () => insertAt(rng, base, " "),
    () => insertAt(rng, base, "\t"),
    () => `${base}#frag`,
    () => `\\open\\${id}\\echo`,
    () => `/open/${utf8AsLatin1("ünï-🙂")}/echo`,
    () => `/open/${id}/${utf8AsLatin1("ünï/🙂")}`,
    () => `/open/${String.fromCharCode(rng.range(0x80, 0xff))}/echo`,
    () => `/open/../open/${id}/echo`,
    () => `/./open/${id}`,
    () => `//open/${id}`,
    () => `/open/./x`,
    () => `/open/..`,
    () => `/healthz`,
    () => `/readyz?x`,
    () => `/registry/workers`,
    () => `/registry`,
    () => `?x=1`
  ])()
}

// ---- request lines --------------------------------------------------------------------------

export const requestLineInput = (rng: Rng, world: World): Input => {
  const kind = rng.weighted<"method" | "target" | "version" | "framing" | "all" | "preface" | "pipelined">([
    [1, "pipelined"],
    [3, "method"],
    [4, "target"],
    [2, "version"],
    [1, "framing"],
    [2, "all"],
    [0.2, "preface"]
  ])
  if (kind === "pipelined") {
    // Several requests in one write, answered in order on the one connection.
    const n = rng.range(2, 6)
    const targets = Array.from({ length: n }, () => `/open/${pooledId(rng)}/echo?n=${rng.int(1000)}`)
    const data = Buffer.concat(
      targets.map((target, i) => headBytes({ method: "GET", target, headers: [["Host", world.host], ...(i === n - 1 ? [["Connection", "close"] as [string, string]] : [])] }))
    )
    return {
      category: "request-line",
      variant: "pipelined",
      send: { kind: "raw", parts: [{ data }], after: { mode: "read", untilClose: true }, headRequest: false },
      context: { method: "GET", path: targets[0]!, upgrade: false },
      expect: (observation, classified) => {
        if (observation.responses.length !== n) return `${observation.responses.length} answers to ${n} pipelined requests`
        for (const [i, target] of targets.entries()) {
          if (classified[i]!.label !== "worker 200") return `answer ${i + 1}: ${classified[i]!.label}`
          const problem = checkEcho(observation.responses[i]!, { method: "GET", url: target })
          if (problem !== undefined) return `answer ${i + 1}: ${problem}`
        }
        return undefined
      }
    }
  }
  if (kind === "preface") {
    const data = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1")
    return { category: "request-line", variant: "HTTP/2 preface", send: readAll(data, "PRI"), context: { method: "PRI", path: "*", upgrade: false } }
  }
  const method =
    kind === "method" || kind === "all" ? rng.pick(rng.chance(0.4) ? METHODS_RARE : rng.chance(0.5) ? METHODS_BAD : METHODS_OK) : rng.pick(METHODS_OK)
  const target = kind === "target" || kind === "all" ? oddTarget(rng, world) : `/open/${pooledId(rng)}${echoRest(rng)}`
  const version = kind === "version" || kind === "all" ? rng.pick(rng.chance(0.7) ? VERSIONS_BAD : VERSIONS_OK) : rng.pick(VERSIONS_OK)
  const eol = kind === "framing" || (kind === "all" && rng.chance(0.3)) ? rng.pick(["\n", "\r", "\r\r\n", "\n\r"]) : "\r\n"
  const sep = kind === "framing" || (kind === "all" && rng.chance(0.3)) ? rng.pick(["  ", "\t", " \t", ""]) : " "
  const data = headBytes({ method, target, version, headers: baseHeaders(world, rng), eol, sep })
  // Whitespace or line breaks in the target: node:http's parser reads the line its own way.
  const wellFormed =
    METHODS_OK.includes(method) && VERSIONS_OK.includes(version) && eol === "\r\n" && sep === " " && method !== "TRACE" && !/[\s]/.test(target)
  return {
    category: "request-line",
    variant: kind,
    send: readAll(data, method),
    context: { method, path: target, upgrade: false },
    ...(wellFormed && target.startsWith("/") ? { expect: expectForTarget(target, method, {}, {}, data.length) } : {})
  }
}

// ---- paths and ids --------------------------------------------------------------------------

const FORBIDDEN_PRINTABLE = "!\"#$%&'()*+,:;<=>@[\\]^`{|}"

const oddId = (rng: Rng): string =>
  rng.pick<() => string>([
    () => pooledId(rng),
    () => "",
    () => rng.chars(256, ID_ALPHABET),
    () => rng.chars(257, ID_ALPHABET),
    () => rng.chars(rng.range(258, 4000), ID_ALPHABET),
    () => insertAt(rng, pooledId(rng), FORBIDDEN_PRINTABLE[rng.int(FORBIDDEN_PRINTABLE.length)]!),
    () => insertAt(rng, pooledId(rng), `%${rng.chars(2, "0123456789ABCDEF")}`),
    () => insertAt(rng, pooledId(rng), String.fromCharCode(rng.range(0x80, 0xff))),
    () => insertAt(rng, pooledId(rng), utf8AsLatin1(rng.pick(["é", "ß", "😀", "\u2028", "\ufeff", "中"]))),
    () => insertAt(rng, pooledId(rng), ctl(rng)),
    () => ".",
    () => "..",
    () => "...",
    () => "~",
    () => rng.chars(255, "-"),
    () => rng.chars(256, ID_ALPHABET) + FORBIDDEN_PRINTABLE[rng.int(FORBIDDEN_PRINTABLE.length)]!
  ])()

const NAMESPACES = ["/open", "/open", "/open", "/opt", "/auth", "/calls", "/star", "/nope", "/Open", "/open.", "/op~en", `/${"n".repeat(129)}`, `/${"n".repeat(128)}`, "/fz1", "/healthz", "/readyz", "/registry2"]

export const pathInput = (rng: Rng, world: World): Input => {
  const namespace = rng.pick(NAMESPACES)
  const id = oddId(rng)
  const shape = rng.weighted<string>([
    [10, "ns/id/rest"],
    [2, "ns"],
    [2, "ns/"],
    [1, "//"],
    [2, "ns//x"],
    [2, "ns/id"],
    [2, "ns/id/"],
    [2, "ns/id?q"],
    [1, "ns/?q"],
    [1, "ns//"],
    [1, "/"],
    [1, "ns/id/dots"]
  ])
  const rest = echoRest(rng)
  const target = {
    "ns/id/rest": `${namespace}/${id}${rest}`,
    ns: namespace,
    "ns/": `${namespace}/`,
    "//": "//",
    "ns//x": `${namespace}//x`,
    "ns/id": `${namespace}/${id}`,
    "ns/id/": `${namespace}/${id}/`,
    "ns/id?q": `${namespace}/${id}?${rng.pick(["", "a=1", "a=%ZZ&b", "/x/y", "?"])}`,
    "ns/?q": `${namespace}/?x=1`,
    "ns//": `${namespace}//`,
    "/": "/",
    "ns/id/dots": `${namespace}/${id}/${rng.pick(["..", ".", "../..", "./x", "%2e%2e", "..%2f"])}/echo`
  }[shape]!
  const method = rng.pick(["GET", "GET", "HEAD", "DELETE", "OPTIONS"])
  // Credentials the rules want, right ones mostly, so the path is what decides.
  const credentials: Credentials = {}
  const headers = baseHeaders(world, rng)
  if (namespace === "/auth" || namespace === "/calls") {
    if (rng.chance(0.8)) {
      headers.push(["Authorization", `Bearer ${userToken()}`])
      Object.assign(credentials, { authorization: "hs-scoped" })
    }
  } else if (namespace !== "/open" && namespace !== "/opt" && rng.chance(0.8)) {
    headers.push(["X-Api-Key", API_KEY])
    Object.assign(credentials, { apiKeyHeader: "apikey" })
  }
  const data = headBytes({ method, target, headers })
  return {
    category: "path",
    variant: shape,
    send: readAll(data, method),
    context: { method, path: target, upgrade: false },
    expect: expectForTarget(target, method, credentials, {}, data.length)
  }
}

// ---- headers ---------------------------------------------------------------------------------

const BAD_NAMES = ["X Bad", "X\0Y", "", " X", "X\t", "(x)", "X@Y", "X,Y", utf8AsLatin1("Ümlaut"), "\x80", "X/Y", "X\"Y", "{}"]

export const headersInput = (rng: Rng, world: World): Input => {
  const id = pooledId(rng)
  const target = `/open/${id}/echo`
  const headers = baseHeaders(world, rng)
  const check: { absent: Array<string>; neverForwarded: Array<string>; equal: Record<string, string> } = { absent: [], neverForwarded: [], equal: {} }
  let method = "GET"
  let body: Buffer | undefined
  /** The request stays well-formed and its echo can be checked. */
  let wellFormed = true
  let labels: Array<string> | undefined
  const marker = `m${rng.chars(10, "abcdefghijklmnopqrstuvwxyz")}`
  const variant = rng.pick([
    "duplicate", "huge-value", "too-large", "many", "bad-name", "bad-value", "obs-fold", "cl-te", "connection-list",
    "host", "expect", "spoof", "origin", "pinboard-headers", "hop-by-hop", "worker-headers", "worker-status", "worker-redirect"
  ])
  if (variant === "worker-headers" || variant === "worker-status" || variant === "worker-redirect") return workerAnswerInput(rng, world, variant)
  switch (variant) {
    case "duplicate": {
      const name = rng.pick(["Host", "Content-Length", "Authorization", "Cookie", "X-Api-Key", "Pinboard-Caller", "Connection", "Transfer-Encoding", "X-Dup", "Content-Type", "Origin"])
      const value = name === "Content-Length" ? rng.pick(["0", "1", "5"]) : name === "Transfer-Encoding" ? "chunked" : rng.chars(8, TOKEN_ALPHABET)
      headers.push([name, value], [name, rng.chance(0.5) ? value : rng.chars(8, TOKEN_ALPHABET)])
      wellFormed = false
      break
    }
    case "huge-value":
      headers.push([`X-Big-${rng.int(9)}`, rng.chars(rng.range(4000, 14000), TOKEN_ALPHABET)])
      break
    case "too-large":
      headers.push(["X-Huge", rng.chars(rng.range(16 * 1024, 40 * 1024), TOKEN_ALPHABET)])
      labels = ["node 431"]
      wellFormed = false
      break
    case "many": {
      const n = rng.range(50, 2500)
      for (let i = 0; i < n; i++) headers.push([`X-H${i}`, "v"])
      wellFormed = false
      break
    }
    case "bad-name":
      headers.push([rng.pick(BAD_NAMES), "v"])
      wellFormed = false
      break
    case "bad-value":
      headers.push(["X-Bad", insertAt(rng, "value", rng.chance(0.5) ? ctl(rng) : String.fromCharCode(rng.range(0x80, 0xff)))])
      wellFormed = false
      break
    case "obs-fold":
      headers.push(["X-Folded", `a\r\n${rng.pick([" ", "\t"])}b`])
      wellFormed = false
      break
    case "cl-te": {
      method = "POST"
      body = Buffer.from("5\r\nhello\r\n0\r\n\r\n")
      const framing = rng.pick<Array<[string, string]>>([
        [["Content-Length", String(body.length)], ["Transfer-Encoding", "chunked"]],
        [["Transfer-Encoding", "chunked"], ["Content-Length", "3"]],
        [["Transfer-Encoding", "gzip, chunked"]],
        [["Transfer-Encoding", "chunked, gzip"]],
        [["Transfer-Encoding", "identity"]],
        [["Transfer-Encoding", " chunked"]],
        [["Transfer-Encoding", "chunked"], ["Transfer-Encoding", "chunked"]],
        [["Transfer-Encoding", "xchunked"]],
        [["Content-Length", "-1"]],
        [["Content-Length", "+5"]],
        [["Content-Length", "0x5"]],
        [["Content-Length", "5,5"]],
        [["Content-Length", "5, 6"]],
        [["Content-Length", "99999999999999999999"]],
        [["Content-Length", " 5 "]],
        [["Content-Length", ""]]
      ])
      headers.push(...framing)
      wellFormed = false
      break
    }
    case "connection-list": {
      // Every header named in Connection is hop-by-hop: stripped (docs/proxy.md "Forwarding").
      const named = rng.pick(["x-secret", "pinboard-epoch", "x-forwarded-for", "cookie", "x-api-key", "content-type", "x-a, x-b", "X-Secret , ,x-other", "keep-alive"])
      headers.splice(headers.findIndex(([n]) => n === "Connection"), 1)
      headers.push(["Connection", `close, ${named}`])
      for (const name of named.split(",").map((n) => n.trim().toLowerCase()).filter((n) => n !== "")) {
        if (!["pinboard-epoch", "x-forwarded-for", "keep-alive"].includes(name)) {
          headers.push([name, marker])
          check.absent.push(name)
        }
      }
      break
    }
    case "host": {
      const hostIndex = headers.findIndex(([n]) => n === "Host")
      const host = rng.pick(["", "a b", "[::1]:80", "[::1", "u@h", "h:99999", "h:-1", "x".repeat(rng.range(100, 8000)), "ünï", "h\tx", "localhost"])
      if (rng.chance(0.3)) headers.splice(hostIndex, 1)
      else headers[hostIndex] = ["Host", utf8AsLatin1(host)]
      break
    }
    case "expect":
      method = "POST"
      body = Buffer.from("expected body")
      headers.push(["Expect", rng.pick(["100-continue", "100-Continue", "foo", "", "100-continue, foo"])], ["Content-Length", String(body.length)])
      wellFormed = false
      break
    case "spoof":
      headers.push(["X-Forwarded-For", rng.pick(["1.2.3.4", "evil", "127.0.0.1, 10.0.0.1", ""])])
      break
    case "origin":
      headers.push(["Origin", rng.pick(["https://app.example", "null", "http://127.0.0.1", "x"])])
      break
    case "pinboard-headers": {
      const name = rng.pick(["Pinboard-Attestation", "Pinboard-Epoch", "Pinboard-Foo", "PINBOARD-ATTESTATION", "pinboard-", "Pinned-Refusal"])
      headers.push([name, marker])
      if (name.toLowerCase() !== "pinned-refusal") check.neverForwarded.push(marker)
      break
    }
    case "hop-by-hop": {
      const name = rng.pick(["Keep-Alive", "TE", "Trailer", "Proxy-Authorization", "Proxy-Foo", "Upgrade"])
      headers.push([name, name === "Upgrade" ? marker : marker])
      if (name === "Upgrade") wellFormed = false // makes it an upgrade attempt
      else check.neverForwarded.push(marker)
      break
    }
  }
  const data = requestBytes({ method, target, headers, ...(body === undefined ? {} : { body }) })
  let expect = labels !== undefined ? expectLabels(labels) : wellFormed ? expectForTarget(target, method, {}, check, data.length) : undefined
  const origin = headers.find(([n]) => n === "Origin")?.[1]
  if (expect !== undefined && origin !== undefined) {
    // Seed "Response": a request with an Origin gets Access-Control-Allow-Origin and Vary: origin.
    const labelsOk = expect
    expect = (observation, classified) => {
      const problem = labelsOk(observation, classified)
      if (problem !== undefined) return problem
      const response = observation.responses[0]
      if (response === undefined || classified[0]?.kind === "node") return undefined
      const allow = response.headers.find(([n]) => n === "access-control-allow-origin")?.[1]
      const vary = response.headers.filter(([n]) => n === "vary").map(([, v]) => v.toLowerCase()).join(",")
      if (allow !== origin) return `Access-Control-Allow-Origin ${JSON.stringify(allow)} for Origin ${origin}`
      if (!vary.includes("origin")) return `Vary ${JSON.stringify(vary)} without origin`
      return undefined
    }
  }
  return {
    category: "headers",
    variant,
    send: readAll(data, method),
    context: { method, path: target, upgrade: variant === "hop-by-hop" && !wellFormed },
    ...(expect === undefined ? {} : { expect })
  }
}

/**
 * The worker's own answer, shaped by the client (the fixture's /headers, /status, /redirect):
 * odd response headers and statuses, relayed under the rules of docs/proxy.md "Forwarding".
 */
const workerAnswerInput = (rng: Rng, world: World, variant: "worker-headers" | "worker-status" | "worker-redirect"): Input => {
  const id = pooledId(rng)
  const headers = baseHeaders(world, rng)
  let target: string
  let labels: Array<string>
  /** Response headers (name, the worker's value) that must not reach the client. */
  const stripped: Array<[string, string | undefined]> = [["pinned-refusal", undefined]]
  if (variant === "worker-status") {
    const status = rng.pick([200, 201, 202, 203, 204, 205, 206, 226, 299, 300, 301, 302, 303, 304, 307, 308, 400, 401, 403, 404, 405, 409, 410, 418, 429, 451, 499, 501, 502, 503, 504, 599, 600, 999, 1000, 0, -1])
    target = `/open/${id}/status/${status}`
    // node:http refuses to write a status outside 100-999: the worker's handler fails, 502.
    labels = status >= 200 && status <= 999 ? [`worker ${status}`] : ["BadGateway"]
  } else if (variant === "worker-redirect") {
    const to = rng.pick(["/elsewhere", "https://evil.example/x", "//evil.example", `/open/${id}/echo`, "", "javascript:alert(1)", "http://127.0.0.1:1/", "a\r\nSet-Cookie: x=1", "\u00e9"])
    target = `/open/${id}/redirect?to=${encodeURIComponent(to)}`
    // Redirects are passed on, never followed; a Location node:http refuses (CR, LF) fails the worker: 502.
    labels = /[\r\n]/.test(to) ? ["BadGateway"] : ["worker 302"]
  } else {
    const names = ["X-Odd", "Pinboard-Epoch", "Pinboard-Attestation", "pinboard-x", "Pinned-Refusal", "Keep-Alive", "Proxy-Authenticate", "Upgrade", "Trailer", "TE", "Connection", "Set-Cookie", "Vary", "Access-Control-Allow-Origin", "X-Accel-Buffering", "Retry-After", "Date", "Server"]
    const pairs: Array<[string, string]> = []
    let broken = false
    const count = rng.range(1, 4)
    for (let i = 0; i < count; i++) {
      const name = rng.pick(names)
      const value = rng.pick<() => string>([
        () => rng.chars(rng.range(0, 40), TOKEN_ALPHABET),
        () => "lease-unhealthy",
        () => "x-odd, x-gone",
        () => "\u00e9t\u00e9",
        () => "a\u0000b",
        () => "v".repeat(rng.range(1000, 8000))
      ])()
      if (value === "a\u0000b") broken = true
      pairs.push([name, value])
      const lower = name.toLowerCase()
      // Pinboard's own node:http adds Keep-Alive and Connection: only the worker's values count.
      if (lower.startsWith("pinboard-")) stripped.push([lower, undefined])
      if (["keep-alive", "upgrade", "trailer", "te", "proxy-authenticate"].includes(lower)) stripped.push([lower, value])
      if (lower === "connection") {
        for (const listed of value.split(",").map((n) => n.trim().toLowerCase()).filter((n) => n !== "" && n !== "close" && n !== "keep-alive")) {
          pairs.push([listed, "hop"])
          stripped.push([listed, "hop"])
        }
      }
    }
    target = `/open/${id}/headers?${pairs.map(([n, v]) => `h=${encodeURIComponent(`${n}:${v}`)}`).join("&")}`
    labels = broken ? ["BadGateway"] : ["worker 200"]
    // Response heads past undici's 16 KiB limit: the worker's answer cannot be read, 502.
    if (pairs.reduce((n, [name, v]) => n + name.length + v.length, 0) > 14 * 1024) labels.push("BadGateway")
    // A worker Connection header naming a header Node itself sets (Date, say) leaves that one unstripped by us.
    if (pairs.some(([n]) => n.toLowerCase() === "connection")) labels.push("BadGateway")
  }
  const data = headBytes({ method: "GET", target, headers })
  if (data.length > 16 * 1024 - 1024) labels.push("node 431", "worker 431")
  return {
    category: "headers",
    variant,
    send: readAll(data, "GET"),
    context: { method: "GET", path: target, upgrade: false },
    expect: (observation, classified) => {
      const first = classified[0]
      if (first === undefined) return `no answer (expected ${labels.join(" or ")})`
      if (!labels.includes(first.label)) return `got ${first.label}, expected ${labels.join(" or ")}`
      if (first.kind !== "worker") return undefined
      const response = observation.responses[0]!
      for (const [name, value] of stripped) {
        if (response.headers.some(([n, v]) => n === name && (value === undefined || v === value.trim()))) return `the worker's ${name} reached the client`
      }
      if (response.headers.filter(([n]) => n === "x-accel-buffering").some(([, v]) => v !== "no")) return "X-Accel-Buffering is not no"
      return undefined
    }
  }
}

// ---- bodies ---------------------------------------------------------------------------------

const chunked = (rng: Rng, body: Buffer): Buffer => {
  const parts: Array<Buffer> = []
  let at = 0
  while (at < body.length) {
    const n = Math.min(body.length - at, rng.range(1, 64 * 1024))
    const ext = rng.chance(0.1) ? ";ext=1" : ""
    parts.push(Buffer.from(`${n.toString(16)}${ext}\r\n`), body.subarray(at, at + n), Buffer.from("\r\n"))
    at += n
  }
  parts.push(Buffer.from(rng.chance(0.1) ? "0\r\nX-Trailer: t\r\n\r\n" : "0\r\n\r\n"))
  return Buffer.concat(parts)
}

/** Splits bytes into parts written with small pauses, as a slow client would. */
const dribble = (rng: Rng, data: Buffer, pieces: number, maxDelayMs: number): Array<Part> => {
  const parts: Array<Part> = []
  const size = Math.ceil(data.length / pieces)
  for (let at = 0; at < data.length; at += size) parts.push({ data: data.subarray(at, at + size), delayMs: rng.int(maxDelayMs + 1) })
  return parts
}

export const bodyInput = (rng: Rng, world: World): Input => {
  const id = pooledId(rng)
  const method = rng.pick(["POST", "PUT", "PATCH", "POST", "DELETE", "OPTIONS", "GET"])
  const target = `/open/${id}/upload`
  const size = rng.weighted<() => number>([
    [6, () => rng.range(0, 2048)],
    [3, () => rng.range(2048, 256 * 1024)],
    [0.3, () => rng.range(1024 * 1024, 4 * 1024 * 1024)]
  ])()
  const body = rng.bytes(size)
  const headers = baseHeaders(world, rng)
  const variant = rng.pick(["sized", "chunked", "bad-chunk-size", "chunk-overrun", "truncated", "longer-than-sized", "slow", "expect-continue", "chunk-ext-huge"])
  const context = { method, path: target, upgrade: false }
  const echo = expectLabels(["worker 200"], { method, url: target, bodyBytes: size, bodySha256: sha256(body) })
  switch (variant) {
    case "sized":
      return { category: "body", variant, send: readAll(requestBytes({ method, target, headers: [...headers, ["Content-Length", String(size)]], body }), method), context, expect: echo }
    case "chunked":
      return { category: "body", variant, send: readAll(requestBytes({ method, target, headers: [...headers, ["Transfer-Encoding", "chunked"]], body: chunked(rng, body) }), method), context, expect: echo }
    case "slow": {
      const data = requestBytes({ method, target, headers: [...headers, ["Content-Length", String(size)]], body })
      return { category: "body", variant, send: { kind: "raw", parts: dribble(rng, data, rng.range(2, 6), 30), after: { mode: "read" }, headRequest: false }, context, expect: echo }
    }
    case "expect-continue": {
      const head = headBytes({ method, target, headers: [...headers, ["Content-Length", String(size)], ["Expect", "100-continue"]] })
      return { category: "body", variant, send: { kind: "raw", parts: [{ data: head }, { data: body, delayMs: rng.int(20) }], after: { mode: "read" }, headRequest: false }, context, expect: echo }
    }
    case "bad-chunk-size": {
      const bad = rng.pick(["zz", "-1", "fffffffffffffffffffff", "", " 5", "5 5", "0x5", "5;" + "e".repeat(rng.range(1, 20000)), "\t5"])
      const data = requestBytes({ method, target, headers: [...headers, ["Transfer-Encoding", "chunked"]], body: Buffer.from(`${bad}\r\nhello\r\n0\r\n\r\n`) })
      return { category: "body", variant, send: readAll(data, method), context }
    }
    case "chunk-overrun": {
      // Data longer than its chunk size, or no CRLF after it.
      const text = rng.pick(["3\r\nhello\r\n0\r\n\r\n", "5\r\nhelloXX0\r\n\r\n", "5\r\nhello0\r\n\r\n", "5\r\nhello\r\n", "5\r\nhel"])
      const data = requestBytes({ method, target, headers: [...headers, ["Transfer-Encoding", "chunked"]], body: Buffer.from(text) })
      return { category: "body", variant, send: readAll(data, method), context }
    }
    case "truncated": {
      // Content-Length promises more than comes: the client gives up after a while.
      const data = requestBytes({ method, target, headers: [...headers, ["Content-Length", String(size + rng.range(1, 5000))]], body })
      return { category: "body", variant, send: { kind: "raw", parts: [{ data }], after: { mode: "close", afterMs: rng.range(0, 300) }, headRequest: false }, context }
    }
    case "longer-than-sized": {
      // The extra bytes are the next request on the connection: garbage, mostly.
      const garbage = rng.chance(0.5)
      const extra = garbage ? rng.bytes(rng.range(1, 200)) : Buffer.from(`GET /open/${id}/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
      const data = requestBytes({ method, target, headers: [...headers.filter(([n]) => n !== "Connection"), ["Content-Length", String(size)]], body: Buffer.concat([body, extra]) })
      // Garbage after the body: node:http answers 400 for it at once and closes, the first
      // request's answer unsent (its pipelining; Pinboard has no say).
      const labels = garbage ? ["worker 200", "node 400"] : ["worker 200"]
      return { category: "body", variant, send: readAll(data, method), context, expect: expectLabels(labels, { method, url: target, bodyBytes: size, bodySha256: sha256(body) }) }
    }
    default: {
      const data = requestBytes({ method, target, headers: [...headers, ["Transfer-Encoding", "chunked"]], body: Buffer.from(`5;${"x".repeat(rng.range(1000, 40000))}\r\nhello\r\n0\r\n\r\n`) })
      return { category: "body", variant: "chunk-ext-huge", send: readAll(data, method), context }
    }
  }
}

// ---- clients that stop ----------------------------------------------------------------------

export const stopInput = (rng: Rng, world: World): Input => {
  const id = pooledId(rng)
  const variant = rng.weighted<string>([
    [1, "request-line"],
    [1, "headers"],
    [1, "body"],
    [1, "after-send"],
    [1, "mid-response"],
    [1, "mid-stream"],
    [1, "mid-upload-answer"],
    [1, "idle-then-close"],
    [0.5, "slow-reader"],
    [1, "worker-reset"]
  ])
  const headers = baseHeaders(world, rng)
  const context = { method: "GET", path: `/open/${id}/echo`, upgrade: false }
  const close = (data: Buffer, afterMs: number, method = "GET"): Input => ({
    category: "stop",
    variant,
    send: { kind: "raw", parts: [{ data }], after: { mode: "close", afterMs }, headRequest: false },
    context: { ...context, method }
  })
  switch (variant) {
    case "request-line": {
      const line = `GET /open/${id}/echo HTTP/1.1\r\n`
      return close(Buffer.from(line.slice(0, rng.int(line.length)), "latin1"), rng.int(50))
    }
    case "headers": {
      const head = headBytes({ method: "GET", target: `/open/${id}/echo`, headers: [...headers, ["X-Long", "y".repeat(rng.int(3000))]] })
      return close(head.subarray(0, rng.range(20, head.length - 1)), rng.int(50))
    }
    case "body": {
      const size = rng.range(10, 300 * 1024)
      const data = requestBytes({ method: "POST", target: `/open/${id}/upload`, headers: [...headers, ["Content-Length", String(size)]], body: rng.bytes(rng.int(size)) })
      return close(data, rng.int(200), "POST")
    }
    case "after-send":
      return close(requestBytes({ method: "GET", target: `/open/${id}/echo`, headers }), rng.pick([0, 0, 1, 2, 5]))
    case "mid-response": {
      const bytes = rng.range(100 * 1024, 4 * 1024 * 1024)
      const data = headBytes({ method: "GET", target: `/open/${id}/download?bytes=${bytes}`, headers })
      return {
        category: "stop",
        variant,
        send: { kind: "raw", parts: [{ data }], after: { mode: "close-mid-response", afterBytes: rng.range(1, 64 * 1024) }, headRequest: false },
        context
      }
    }
    case "mid-stream": {
      const data = headBytes({ method: "GET", target: `/open/${id}/stream?chunks=${rng.range(2, 6)}&everyMs=${rng.range(5, 40)}`, headers })
      return {
        category: "stop",
        variant,
        send: { kind: "raw", parts: [{ data }], after: { mode: "close-mid-response", afterBytes: rng.range(1, 300) }, headRequest: false },
        context
      }
    }
    case "mid-upload-answer": {
      // The worker answers early; the client goes away while still sending.
      const size = rng.range(64 * 1024, 1024 * 1024)
      const head = headBytes({ method: "POST", target: `/open/${id}/upload?early=${rng.range(1, 1024)}`, headers: [...headers, ["Content-Length", String(size)]] })
      return {
        category: "stop",
        variant,
        send: { kind: "raw", parts: [{ data: head }, { data: rng.bytes(rng.range(2048, 32 * 1024)), delayMs: 5 }], after: { mode: "close-mid-response", afterBytes: 1 }, headRequest: false },
        context: { ...context, method: "POST" }
      }
    }
    case "slow-reader": {
      // Stops reading for a while: Pinboard must hold the worker back (backpressure), then finish.
      const bytes = rng.range(256 * 1024, 4 * 1024 * 1024)
      const target = `/open/${id}/download?bytes=${bytes}`
      return {
        category: "stop",
        variant,
        send: { kind: "raw", parts: [{ data: headBytes({ method: "GET", target, headers }) }], after: { mode: "read" }, headRequest: false, pauseReadingMs: rng.range(100, 1500) },
        context: { ...context, path: target },
        expect: (observation, classified) => {
          const first = classified[0]
          if (first?.label !== "worker 200") return `got ${first?.label ?? "no answer"}, expected worker 200`
          const response = observation.responses[0]!
          if (!response.complete || response.body.length !== bytes) return `${response.body.length} of ${bytes} bytes${response.complete ? "" : " (cut)"}`
          for (let i = 0; i < response.body.length; i += 4099) if (response.body[i] !== i % 251) return `byte ${i} differs`
          return undefined
        }
      }
    }
    case "worker-reset": {
      // The worker goes away before its headers (502) or in the middle of its body (cut).
      const before = rng.chance(0.5)
      const target = `/open/${id}/reset${before ? "?before=1" : ""}`
      return {
        category: "stop",
        variant,
        send: readAll(headBytes({ method: "GET", target, headers }), "GET"),
        context: { ...context, path: target },
        expect: (observation, classified) => {
          const first = classified[0]
          if (before) return first?.label === "BadGateway" ? undefined : `got ${first?.label ?? "no answer"}, expected BadGateway`
          if (first === undefined) return undefined // cut before the head was flushed
          if (first.label !== "worker 200") return `got ${first.label}, expected the worker's 200, cut`
          return observation.responses[0]!.complete ? "a body cut by the worker arrived complete" : undefined
        }
      }
    }
    default: {
      // Connects, says nothing, leaves.
      return close(Buffer.alloc(0), rng.range(0, 100))
    }
  }
}

// ---- WebSocket upgrades ---------------------------------------------------------------------

export const websocketInput = (rng: Rng, world: World): Input => {
  const id = pooledId(rng)
  const key = rng.bytes(16).toString("base64")
  const variant = rng.weighted<string>([
    [6, "valid"],
    [2, "auth-valid"],
    [1, "auth-missing"],
    [1, "no-key"],
    [1, "bad-version"],
    [1, "other-protocol"],
    [1, "probe-path"],
    [1, "no-id"],
    [1, "bad-id"],
    [1, "post-with-body"],
    [1, "deny"],
    [1, "bad-caller"],
    [1, "partial"],
    [1, "unknown-namespace"],
    [1, "caller-valid"]
  ])
  let target = `/open/${id}/ws`
  let method = "GET"
  const headers: Array<[string, string]> = [
    ["Host", world.host],
    ["Upgrade", "websocket"],
    ["Connection", "Upgrade"],
    ["Sec-WebSocket-Key", key],
    ["Sec-WebSocket-Version", "13"]
  ]
  let body: Buffer | undefined
  let labels: Array<string> | undefined
  switch (variant) {
    case "valid":
      labels = ["upgrade 101"]
      break
    case "auth-valid":
      target = `/auth/${id}/ws`
      headers.push(["Authorization", `Bearer ${userToken()}`])
      labels = ["upgrade 101"]
      break
    case "auth-missing":
      target = `/auth/${id}/ws`
      labels = ["bare 401"]
      break
    case "no-key":
      headers.splice(3, 1)
      labels = ["bare 400"]
      break
    case "bad-version":
      // `ws` speaks versions 8 and 13.
      headers[4] = ["Sec-WebSocket-Version", rng.pick(["7", "x", "", "99"])]
      labels = ["bare 400"]
      break
    case "other-protocol":
      headers[1] = ["Upgrade", rng.pick(["h2c", "foo", "websocket, h2c", "WebSocket", ""])]
      break
    case "probe-path":
      // Upgrades are instance requests: `/healthz` has no id; `/registry/workers` is namespace
      // `/registry`, id `workers`, under the `*` rule (no X-Api-Key here).
      target = rng.pick(["/healthz", "/readyz", "/registry", "/registry/workers", "/healthz/x/ws"])
      labels = target.split("/").length > 2 ? ["bare 401"] : ["bare 404"]
      break
    case "no-id":
      target = rng.pick(["/open", "/open/", "/", "*"])
      labels = ["bare 404"]
      break
    case "bad-id":
      target = rng.pick(["/open//ws", `/open/${"a".repeat(257)}/ws`, "/open/a%20b/ws", "/open/a!b/ws"])
      labels = ["bare 400"]
      break
    case "post-with-body":
      method = rng.pick(["POST", "PUT", "DELETE"])
      body = Buffer.from("hello")
      headers.push(["Content-Length", "5"])
      break
    case "deny":
      target = `/open/${id}/ws-deny`
      labels = ["bare 403"]
      break
    case "bad-caller":
      headers.push(["Pinboard-Caller", rng.chars(rng.range(1, 200), TOKEN_ALPHABET)])
      labels = ["bare 403"]
      break
    case "caller-valid": {
      // A call from an instance: skips the rule (no credential for /auth here), tunnels through.
      const placed = world.placed.find((p) => p.namespace === "/open")
      target = `/auth/${id}/ws`
      if (placed !== undefined) headers.push(["Pinboard-Caller", callerToken(callerClaims(placed, { depth: rng.int(40) }))])
      labels = placed === undefined ? undefined : ["upgrade 101"]
      break
    }
    case "unknown-namespace":
      target = `/nowhere/${id}/ws`
      headers.push(["X-Api-Key", API_KEY])
      labels = ["bare 404"]
      break
    default:
      break
  }
  const data = requestBytes({ method, target, headers, ...(body === undefined ? {} : { body }) })
  if (variant === "partial") {
    return {
      category: "websocket",
      variant,
      send: { kind: "raw", parts: [{ data: data.subarray(0, rng.int(data.length)) }], after: { mode: "close", afterMs: rng.int(30) }, headRequest: false },
      context: { method, path: target, upgrade: true }
    }
  }
  const message = rng.chance(0.8) ? `hello ${rng.chars(rng.range(0, 200), ID_ALPHABET)}` : undefined
  const ending = rng.pick(["close-frame", "destroy", "destroy-before-echo"] as const)
  // Where the client stops: mostly after the script, sometimes right after sending.
  const stopEarly = rng.chance(0.15)
  return {
    category: "websocket",
    variant: stopEarly ? `${variant} (stops at once)` : variant,
    send: stopEarly
      ? { kind: "raw", parts: [{ data }], after: { mode: "close", afterMs: rng.int(20) }, headRequest: false }
      : { kind: "raw", parts: [{ data }], after: { mode: "ws", ws: { message, ending } }, headRequest: false },
    context: { method, path: target, upgrade: true },
    ...(stopEarly || labels === undefined
      ? {}
      : {
          expect: (observation, classified) => {
            const first = classified[0]
            if (first === undefined) return observation.hung ? undefined : `no answer to the upgrade (expected ${labels!.join(" or ")})`
            if (!labels!.includes(first.label)) return `got ${first.label}, expected ${labels!.join(" or ")}`
            const ws = (observation as { ws?: { echo: string | undefined } }).ws
            if (first.label === "upgrade 101" && message !== undefined && ending !== "destroy-before-echo" && ws?.echo !== undefined && ws.echo !== message) {
              return `the WebSocket echo was ${JSON.stringify(ws.echo.slice(0, 40))}`
            }
            return undefined
          }
        })
  }
}

// ---- byte mutations of well-formed requests -------------------------------------------------

const seedRequest = (rng: Rng, world: World): { data: Buffer; method: string; path: string; upgrade: boolean } => {
  const id = pooledId(rng)
  const headers = baseHeaders(world, rng)
  return rng.pick<() => { data: Buffer; method: string; path: string; upgrade: boolean }>([
    () => ({ data: requestBytes({ method: "GET", target: `/open/${id}/echo?x=1`, headers }), method: "GET", path: `/open/${id}/echo`, upgrade: false }),
    () => ({
      data: requestBytes({ method: "POST", target: `/open/${id}/upload`, headers: [...headers, ["Content-Length", "11"], ["Content-Type", "text/plain"]], body: Buffer.from("hello world") }),
      method: "POST",
      path: `/open/${id}/upload`,
      upgrade: false
    }),
    () => ({
      data: requestBytes({ method: "POST", target: `/open/${id}/upload`, headers: [...headers, ["Transfer-Encoding", "chunked"]], body: Buffer.from("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n") }),
      method: "POST",
      path: `/open/${id}/upload`,
      upgrade: false
    }),
    () => ({ data: requestBytes({ method: "GET", target: `/auth/${id}/echo`, headers: [...headers, ["Authorization", `Bearer ${userToken()}`]] }), method: "GET", path: `/auth/${id}/echo`, upgrade: false }),
    () => ({ data: requestBytes({ method: "GET", target: `/opt/${id}/echo`, headers: [...headers, ["Cookie", `a=b; session=${userToken()}`]] }), method: "GET", path: `/opt/${id}/echo`, upgrade: false }),
    () => {
      const body = Buffer.from(JSON.stringify({ namespace: "/fz1", id, epoch: "1" }))
      return {
        data: requestBytes({ method: "POST", target: "/registry/release", headers: [...headers, ["Authorization", "Bearer fuzz-deployment-token-0b5e55ed"], ["Content-Type", "application/json"], ["Content-Length", String(body.length)]], body }),
        method: "POST",
        path: "/registry/release",
        upgrade: false
      }
    },
    () => ({
      data: requestBytes({
        method: "GET",
        target: `/open/${id}/ws`,
        headers: [["Host", world.host], ["Upgrade", "websocket"], ["Connection", "Upgrade"], ["Sec-WebSocket-Key", rng.bytes(16).toString("base64")], ["Sec-WebSocket-Version", "13"]]
      }),
      method: "GET",
      path: `/open/${id}/ws`,
      upgrade: true
    }),
    () => ({ data: requestBytes({ method: "GET", target: "/healthz", headers }), method: "GET", path: "/healthz", upgrade: false })
  ])()
}

const INTERESTING = [0x00, 0x09, 0x0a, 0x0d, 0x20, 0x22, 0x25, 0x2f, 0x3a, 0x3f, 0x7f, 0x80, 0xff]

export const mutate = (rng: Rng, data: Buffer, edits: number): Buffer => {
  let out = Buffer.from(data)
  for (let i = 0; i < edits; i++) {
    const at = rng.int(out.length + 1)
    switch (rng.int(8)) {
      case 0: // flip a bit
        if (at < out.length) out[at] = out[at]! ^ (1 << rng.int(8))
        break
      case 1: // an interesting byte
        if (at < out.length) out[at] = rng.pick(INTERESTING)
        break
      case 2: // insert bytes
        out = Buffer.concat([out.subarray(0, at), rng.bytes(rng.range(1, 8)), out.subarray(at)])
        break
      case 3: // delete bytes
        out = Buffer.concat([out.subarray(0, at), out.subarray(Math.min(out.length, at + rng.range(1, 8)))])
        break
      case 4: // duplicate a slice
        {
          const len = rng.range(1, 64)
          out = Buffer.concat([out.subarray(0, at), out.subarray(at, at + len), out.subarray(at)])
        }
        break
      case 5: // insert a line break
        out = Buffer.concat([out.subarray(0, at), Buffer.from(rng.pick(["\r\n", "\n", "\r", "\r\n\r\n", "\r\n "])), out.subarray(at)])
        break
      case 6: // truncate
        out = out.subarray(0, Math.max(1, at))
        break
      default: // a digit changed (lengths, chunk sizes, versions)
        {
          const digits: Array<number> = []
          for (let j = 0; j < out.length; j++) if (out[j]! >= 0x30 && out[j]! <= 0x39) digits.push(j)
          if (digits.length > 0) out[rng.pick(digits)] = 0x30 + rng.int(10)
        }
    }
  }
  return out
}

export const mutationInput = (rng: Rng, world: World): Input => {
  const seed = seedRequest(rng, world)
  const data = mutate(rng, seed.data, rng.range(1, 4))
  return {
    category: "mutation",
    variant: seed.upgrade ? "upgrade" : seed.method,
    send: { kind: "raw", parts: [{ data }], after: { mode: "read" }, headRequest: data.subarray(0, 5).toString("latin1") === "HEAD " },
    context: { method: seed.method, path: seed.path, upgrade: seed.upgrade }
  }
}
