// Generators of JWS inputs (credentials for the data-plane rules, in Authorization, a cookie
// and X-Api-Key) and attestation inputs (Pinboard-Caller signed right and wrong, with good and
// bad claims; client-sent Pinboard-* headers). Well-formed HTTP: sent through node:http.
import { API_KEY, JWT_SECRET } from "./fleet.js"
import {
  checkEcho,
  expectedLabels,
  freshId,
  pickPlaced,
  pooledId,
  type Credential,
  type Credentials,
  type EchoCheck,
  type Input,
  type World
} from "./common.js"
import { splitTarget } from "./http.js"
import { B64URL_ALPHABET, TOKEN_ALPHABET, type Rng } from "../prng.js"
import {
  ATTESTATION_KEY,
  brokenJws,
  callerClaims,
  callerToken,
  mutateText,
  nowS,
  oddValue,
  signHs,
  userClaims,
  userToken,
  type Placed
} from "./tokens.js"
import type { Observation } from "./wire.js"
import type { Classified } from "./catalogue.js"

/** A credential and what the providers make of it. */
const credential = (rng: Rng, accepts: "jwt" | "apikey"): { value: string; verdict: Credential; how: string } => {
  if (accepts === "apikey") {
    return rng.pick<() => { value: string; verdict: Credential; how: string }>([
      () => ({ value: API_KEY, verdict: "apikey", how: "api key" }),
      () => ({ value: API_KEY, verdict: "apikey", how: "api key" }),
      () => ({ value: mutateText(rng, API_KEY, rng.range(1, 3)), verdict: "invalid", how: "mutated api key" }),
      () => ({ value: rng.chars(rng.range(1, 300), TOKEN_ALPHABET), verdict: "invalid", how: "random api key" }),
      // Valid for the `hs` provider: accepted where the rule has it (`/auth`), not elsewhere.
      () => ({ value: userToken(), verdict: "hs-scoped", how: "a JWT where an api key goes" }),
      () => ({ value: API_KEY.toUpperCase(), verdict: "invalid", how: "api key, other case" })
    ])()
  }
  const kind = rng.weighted<string>([
    [5, "hs-scoped"],
    [2, "hs-unscoped"],
    [1, "scp-list"],
    [1, "apikey"],
    [2, "expired"],
    [1, "not-yet"],
    [1, "wrong-iss"],
    [1, "wrong-aud"],
    [6, "broken"],
    [4, "claims"],
    [2, "random"],
    [1, "huge"]
  ])
  switch (kind) {
    case "hs-scoped":
      return { value: userToken(), verdict: "hs-scoped", how: kind }
    case "hs-unscoped":
      return { value: userToken({ scope: rng.pick(["read", "", "fuzzy", "FUZZ"]) }), verdict: "hs-unscoped", how: kind }
    case "scp-list":
      return { value: userToken({ scope: undefined, scp: rng.pick([["fuzz"], "read fuzz", ["read"]]) }), verdict: "unknown", how: kind }
    case "apikey":
      return { value: API_KEY, verdict: "apikey", how: kind }
    case "expired":
      return { value: userToken({ exp: nowS() - rng.range(10, 100000) }), verdict: "invalid", how: kind }
    case "not-yet":
      return { value: userToken({ nbf: nowS() + rng.range(10, 100000) }), verdict: "invalid", how: kind }
    case "wrong-iss":
      return { value: userToken({ iss: rng.pick(["https://evil/", "", "https://issuer.fuzz.test"]) }), verdict: "invalid", how: kind }
    case "wrong-aud":
      return { value: userToken({ aud: rng.pick(["pinboard", "", ["other"]]) }), verdict: "invalid", how: kind }
    case "broken": {
      const claims = userClaims()
      const broken = brokenJws(rng, userToken(), JWT_SECRET, claims)
      return { value: broken.token, verdict: broken.token === "" ? "none" : "invalid", how: `broken: ${broken.how}` }
    }
    case "claims": {
      const claim = rng.pick(["iss", "aud", "sub", "scope", "scp", "exp", "nbf", "iat", "jti", "extra"])
      return { value: userToken({ [claim]: oddValue(rng) }), verdict: "unknown", how: `claim ${claim}` }
    }
    case "random":
      return { value: rng.chars(rng.range(1, 2000), rng.chance(0.5) ? TOKEN_ALPHABET : `${B64URL_ALPHABET}.`), verdict: "invalid", how: kind }
    default:
      return { value: userToken({ blob: "b".repeat(rng.range(1000, 9000)) }), verdict: "hs-scoped", how: kind }
  }
}

export const jwsInput = (rng: Rng, _world: World): Input => {
  const id = pooledId(rng)
  const namespace = rng.weighted<string>([
    [4, "/auth"],
    [3, "/opt"],
    [2, "/calls"],
    [2, "/star"],
    [0.5, "/nope"]
  ])
  const path = `/${namespace.slice(1)}/${id}/echo`
  const headers: Array<[string, string]> = []
  const credentials: Credentials = {}
  let how: string
  const echo: { equal: Record<string, string> } = { equal: {} }
  if (namespace === "/opt") {
    const c = credential(rng, "jwt")
    how = c.how
    const form = rng.weighted<string>([
      [6, "plain"],
      [1, "among"],
      [1, "twice"],
      [1, "quoted"],
      [1, "other-case"],
      [1, "empty"],
      [1, "spaced"]
    ])
    const cookie = {
      plain: `session=${c.value}`,
      among: `a=1; session=${c.value}; b=2`,
      twice: `session=${c.value}; session=not-a-token`,
      quoted: `session="${c.value}"`,
      "other-case": `Session=${c.value}`,
      empty: "session=",
      spaced: ` session = ${c.value} `
    }[form]!
    headers.push(["Cookie", cookie])
    const verdict: Credential = form === "other-case" || form === "empty" ? "none" : form === "quoted" ? (c.value === "" ? "none" : "invalid") : c.value === "" ? "none" : c.verdict
    Object.assign(credentials, { cookie: verdict })
    how += ` (cookie ${form})`
    if (verdict !== "none" && verdict !== "invalid") echo.equal.cookie = cookie.trim()
  } else if (namespace === "/star" || namespace === "/nope") {
    const c = credential(rng, "apikey")
    how = c.how
    const spaced = rng.chance(0.1)
    headers.push(["X-Api-Key", spaced ? ` ${c.value} ` : c.value])
    Object.assign(credentials, { apiKeyHeader: c.verdict })
  } else {
    const c = credential(rng, rng.chance(0.15) ? "apikey" : "jwt")
    how = c.how
    const prefix = rng.weighted<string>([
      [8, "Bearer "],
      [1, "bearer "],
      [1, "BEARER "],
      [1, ""],
      [1, "Bearer  "],
      [1, "Basic "],
      [0.5, "Bearer"]
    ])
    const value = `${prefix}${c.value}`
    headers.push(["Authorization", value])
    // Node trims the value; `Bearer ` is removed in any letter case; what is left is the credential.
    const trimmed = value.trim()
    const stripped = /^bearer /i.test(trimmed) ? trimmed.slice(7) : trimmed
    const verdict: Credential =
      stripped === "" ? "none" : stripped === c.value ? c.verdict : c.verdict === "unknown" ? "unknown" : "invalid"
    Object.assign(credentials, { authorization: verdict })
    how += ` (prefix ${JSON.stringify(prefix)})`
    if (verdict !== "none" && verdict !== "invalid") echo.equal.authorization = trimmed
  }
  const labels = expectedLabels(namespace, id, credentials)
  return {
    category: "jws",
    variant: how.split(" (")[0]!,
    send: { kind: "http", request: { method: "GET", path, headers } },
    context: { method: "GET", path, upgrade: false },
    expect: expectHttp(labels, { method: "GET", url: path, ...echo })
  }
}

/** The first answer's label must be one of `labels`; a worker 200 is checked as an echo. */
export const expectHttp =
  (labels: ReadonlyArray<string>, echo?: EchoCheck, more?: (observation: Observation) => string | undefined) =>
  (observation: Observation, classified: ReadonlyArray<Classified>): string | undefined => {
    const first = classified[0]
    if (first === undefined) return observation.hung ? undefined : `no answer (${observation.sendError ?? "closed"}); expected ${labels.join(" or ")}`
    if (!labels.includes(first.label)) return `got ${first.label}, expected ${labels.join(" or ")}`
    if (first.label === "worker 200" && echo !== undefined) {
      const problem = checkEcho(observation.responses[0]!, echo)
      if (problem !== undefined) return problem
      return more?.(observation)
    }
    return undefined
  }

// ---- attestation ------------------------------------------------------------------------------

const decodePayload = (jws: string): Record<string, unknown> | undefined => {
  try {
    return JSON.parse(Buffer.from(jws.split(".")[1] ?? "", "base64url").toString("utf8")) as Record<string, unknown>
  } catch {
    return undefined
  }
}

export const attestationInput = (rng: Rng, world: World): Input => {
  const callerNamespace = rng.chance(0.8) ? "/open" : "/opt"
  const placed: Placed | undefined = pickPlaced(rng, world, callerNamespace)
  const target = rng.weighted<string>([
    [4, "/calls"],
    [2, "/auth"],
    [1, "/opt"],
    [2, "/star"],
    [1, "/open"],
    [0.5, "/nope"]
  ])
  const id = rng.chance(0.05) ? rng.pick(["", "a!b", "x".repeat(257)]) : pooledId(rng)
  const path = `${target}/${id}/echo`
  const headers: Array<[string, string]> = []
  if (placed === undefined) throw new Error("no placed caller instances")
  const base = callerClaims(placed)
  const now = nowS()
  // What the token is: right, or which check it should fail.
  type Verdict = "valid" | "invalid" | "expired" | "stale" | "deep" | "unknown" | "absent"
  let verdict: Verdict
  let token: string | undefined
  let depth = 0
  const kind = rng.weighted<string>([
    [6, "valid"],
    [1, "depth-49"],
    [1, "depth-50"],
    [2, "expired"],
    [5, "bad-claim"],
    [3, "stale"],
    [4, "bad-signature"],
    [2, "random"],
    [1, "twice"],
    [2, "forged-attestation"],
    [1, "future-iat"]
  ])
  let variant = kind
  switch (kind) {
    case "valid":
      depth = rng.pick([0, 0, 1, 7, 30])
      token = callerToken({ ...base, depth })
      verdict = "valid"
      break
    case "depth-49":
      depth = 49
      token = callerToken({ ...base, depth })
      verdict = "valid"
      break
    case "depth-50":
      token = callerToken({ ...base, depth: rng.pick([50, 51, 1000, Number.MAX_SAFE_INTEGER]) })
      verdict = "deep"
      break
    case "expired": {
      const exp = now - rng.range(10, 100000)
      token = callerToken({ ...base, iat: exp - 30, exp })
      verdict = "expired"
      break
    }
    case "bad-claim": {
      const bad = rng.pick<() => Record<string, unknown>>([
        () => ({ aud: rng.pick(["other", "", ["other", "x"], 1]) }),
        () => ({ aud: undefined }),
        () => ({ iss: rng.pick([1, "", null, ["fz-w1"]]) }),
        () => ({ sub: rng.pick(["open/x", "/open", "/open/", "/open/a b", "/op en/x", `/open/${"x".repeat(257)}`, "", 5]) }),
        () => ({ epoch: rng.pick([1, "-1", "1.0", "", "x", "1".repeat(21), null]) }),
        () => ({ depth: rng.pick([-1, 1.5, "1", null, 1e300]) }),
        () => ({ exp: now + 61, iat: now }),
        () => ({ iat: undefined }),
        () => ({ exp: undefined }),
        () => ({ sub: undefined }),
        () => ({ iat: "now" }),
        () => ({ exp: "later" })
      ])()
      token = callerToken(JSON.parse(JSON.stringify({ ...base, ...bad })) as Record<string, unknown>)
      verdict = "invalid"
      break
    }
    case "stale": {
      const stale = rng.pick<() => Record<string, unknown>>([
        () => ({ epoch: (BigInt(placed.epoch) + BigInt(rng.range(1, 1000))).toString() }),
        () => ({ epoch: placed.epoch === "0" ? "1" : "0" }),
        () => ({ iss: placed.worker === "fz-w1" ? "fz-w2" : "fz-w1" }),
        () => ({ iss: "fz-nobody" }),
        () => ({ sub: `${placed.namespace}/${freshId(rng)}` }),
        () => ({ sub: `/nowhere/${placed.id}` })
      ])()
      token = callerToken({ ...base, ...stale })
      verdict = "stale"
      break
    }
    case "bad-signature": {
      const broken = brokenJws(rng, callerToken(base), ATTESTATION_KEY, base)
      // Even an empty Pinboard-Caller makes the request a call, a malformed one.
      token = broken.token
      verdict = "invalid"
      variant = `bad-signature: ${broken.how}`
      break
    }
    case "random":
      token = rng.chars(rng.range(1, 3000), rng.chance(0.5) ? TOKEN_ALPHABET : `${B64URL_ALPHABET}.`)
      verdict = "invalid"
      break
    case "twice": {
      const good = callerToken(base)
      headers.push(["Pinboard-Caller", good])
      token = good
      verdict = "invalid" // node:http joins the two: "a, b"
      break
    }
    case "forged-attestation":
      // A client's own Pinboard-Attestation: stripped, never trusted.
      headers.push(["Pinboard-Attestation", signHs(ATTESTATION_KEY, { alg: "HS256" }, { iss: "pinboard", aud: "fz-w1", ns: target, id, epoch: "1", depth: 0 })])
      verdict = "absent"
      break
    default:
      token = callerToken({ ...base, iat: now + rng.range(10, 1000), exp: now + rng.range(10, 60) })
      verdict = "unknown"
  }
  if (token !== undefined) headers.push(["Pinboard-Caller", token])
  // Credentials the rules would want, sometimes: an attested call skips the rule anyway.
  if (rng.chance(0.3)) headers.push(["Authorization", `Bearer ${userToken()}`])
  const split = splitTarget(path)
  let labels: Array<string>
  if (split === "no id" || split === "not origin-form") labels = ["UnknownNamespace"]
  else if (expectedLabels("/open", split.id, {})[0] !== "worker 200") labels = expectedLabels("/open", split.id, {})
  else {
    const resolved = target === "/nope" ? ["UnknownNamespace"] : ["worker 200"]
    const admitted = target === "/calls" && callerNamespace !== "/open" ? ["InsufficientScope"] : resolved
    switch (verdict) {
      case "valid":
        labels = admitted
        break
      case "invalid":
        labels = ["InvalidAttestation"]
        break
      case "expired":
        labels = ["AttestationExpired"]
        break
      case "stale":
        labels = ["StaleAttestation"]
        break
      case "deep":
        labels = ["DepthExceeded"]
        break
      case "unknown":
        labels = [...admitted, "InvalidAttestation", "AttestationExpired"]
        break
      case "absent": {
        const hasAuth = headers.some(([n]) => n === "Authorization")
        labels = expectedLabels(target, split.id, { authorization: hasAuth ? "hs-scoped" : "none" })
        break
      }
    }
  }
  const forged = headers.find(([n]) => n === "Pinboard-Attestation")?.[1]
  return {
    category: "attestation",
    variant,
    send: { kind: "http", request: { method: "GET", path, headers } },
    context: { method: "GET", path, upgrade: false },
    expect: expectHttp(labels, { method: "GET", url: path, ...(forged === undefined ? {} : { neverForwarded: [forged] }) }, (observation) => {
      if (verdict !== "valid") return undefined
      // The forward carries depth + 1 and the caller (docs/config.md).
      const echo = JSON.parse(observation.responses[0]!.body.toString("utf8")) as { headers: Record<string, string> }
      const claims = decodePayload(echo.headers["pinboard-attestation"] ?? "")
      if (claims === undefined) return "Pinboard-Attestation does not decode"
      if (claims.depth !== depth + 1) return `forwarded depth ${String(claims.depth)}, expected ${depth + 1}`
      if (claims.caller !== `${placed.namespace}/${placed.id}`) return `forwarded caller ${String(claims.caller)}`
      return undefined
    })
  }
}
