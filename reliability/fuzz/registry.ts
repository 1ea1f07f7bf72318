// Generators of registry API inputs (docs/registry-api.md): every route, right and wrong methods, with and
// without the deployment token, and bodies from valid seeds mutated at the JSON level (missing,
// extra, null and wrongly typed fields, edge lengths, huge numbers, deep nesting) and the byte
// level (invalid UTF-8, truncation, BOM, 64 KiB+).
import { TOKEN } from "./fleet.js"
import { freshId, pooledId, type Input, type World } from "./common.js"
import { expectHttp } from "./auth.js"
import { ID_ALPHABET, type Rng } from "../prng.js"
import { mutateText, oddValue } from "./tokens.js"
import type { Observation } from "./wire.js"

type Endpoint = "register" | "heartbeat" | "deregister" | "release" | "tag" | "placement" | "workers" | "unknown-route" | "wrong-method"

/** Labels any registry answer may have once the token is right. */
const ANY_REGISTRY = [
  "registry 200",
  "registry 204",
  "registry 409",
  "InvalidRequest",
  "BodyTooLarge",
  "LeaseLost",
  "NotPlaced",
  "RouteNotFound",
  "MethodNotAllowed"
]

let registered = 0

const fzNamespace = (rng: Rng): string => `/fz${rng.int(12)}`

const advertiseUrl = (rng: Rng, world: World): string =>
  rng.chance(0.75) ? `http://127.0.0.1:${rng.pick(world.workerPorts)}` : rng.pick(["http://127.0.0.1:9", "http://127.0.0.1:1/base"])

/** A valid body for the endpoint (docs/registry-api.md's shapes). */
const seedBody = (rng: Rng, world: World, endpoint: Endpoint): Record<string, unknown> => {
  switch (endpoint) {
    case "register": {
      const namespaces = rng.chance(0.02)
        ? Array.from({ length: rng.range(100, 1024) }, (_, i) => `/fzmany${i}`)
        : Array.from({ length: rng.range(1, 3) }, () => fzNamespace(rng))
      return {
        worker: `fzr-${(++registered).toString(36)}`,
        advertiseUrl: advertiseUrl(rng, world),
        namespaces,
        headroom: rng.pick([0, 1, 10, 0.5, 1e6]),
        ...(rng.chance(0.2) ? { draining: rng.chance(0.5) } : {})
      }
    }
    case "heartbeat": {
      const known = world.fuzzWorkers.length > 0 && rng.chance(0.8) ? rng.pick(world.fuzzWorkers) : undefined
      return {
        incarnation: known?.incarnation ?? rng.chars(rng.range(1, 40), ID_ALPHABET),
        headroom: rng.pick([0, 3, 10]),
        ...(rng.chance(0.2) ? { draining: rng.chance(0.5) } : {}),
        ...(rng.chance(0.2) ? { degraded: rng.chance(0.5) } : {})
      }
    }
    case "release":
    case "tag": {
      // Never the control instances (`ctl-*`): the attestation inputs sign for their placements.
      const key = { namespace: rng.chance(0.7) ? fzNamespace(rng) : "/open", id: pooledId(rng) }
      return {
        namespace: key.namespace,
        id: key.id,
        epoch: String(rng.range(0, 60)),
        ...(rng.chance(0.2) ? { env: rng.pick(["", "prod", "x".repeat(128)]) } : {}),
        ...(endpoint === "tag" ? { tag: rng.pick(["", "t", "ünï 🙂", "x".repeat(1024)]) } : {})
      }
    }
    default:
      return {}
  }
}

const REQUIRED: Partial<Record<Endpoint, ReadonlyArray<string>>> = {
  register: ["worker", "advertiseUrl", "namespaces", "headroom"],
  heartbeat: ["incarnation", "headroom"],
  release: ["namespace", "id", "epoch"],
  tag: ["namespace", "id", "epoch", "tag"]
}

/** A value that the field's schema refuses (docs/registry-api.md formats; `null` for optional fields too). */
const invalidValue = (rng: Rng, field: string): unknown => {
  const common = [null, true, [], {}, { a: 1 }]
  const byField: Record<string, ReadonlyArray<unknown>> = {
    worker: ["", "x".repeat(129), "a b", "ü", "a/b", 5, "%41"],
    advertiseUrl: ["", "ftp://x", "http://x?y", "http://x#f", "http://", "/relative", "javascript:alert(1)", "http://a b", 5, "http://x/?"],
    namespaces: [[], "/fz1", ["fz1"], ["/"], [`/${"n".repeat(129)}`], ["/a b"], [5], [null], Array.from({ length: 1025 }, (_, i) => `/n${i}`)],
    headroom: [-1, -1e-9, "1", "NaN", null, true, [1], -1e308],
    draining: [1, 0, "true", "false", "yes"],
    degraded: [1, "true"],
    incarnation: ["", "x".repeat(129), "a b", 7, "ü"],
    namespace: ["", "fz1", "/", "/a b", `/${"n".repeat(129)}`, 5, "/a/b"],
    id: ["", "a b", "x".repeat(257), "a/b", "%41", 5],
    epoch: [1, "-1", "01", "1.0", "", "x", "1".repeat(41), "1e3", " 1"],
    env: [5, "a b", "x".repeat(129), "ü"],
    tag: [5, "x".repeat(1025), "é".repeat(513), "\ud800", "a\udc00b"]
  }
  // `true` is a valid flag: the common list stays for the other fields.
  const flag = field === "draining" || field === "degraded"
  return rng.chance(0.2) && !flag ? rng.pick(common) : rng.pick(byField[field] ?? common)
}

interface Body {
  readonly bytes: Buffer
  readonly how: string
  /** Labels the answer must have, when the mutation decides it. */
  readonly labels?: ReadonlyArray<string> | undefined
  readonly chunked?: boolean
}

const mutateBody = (rng: Rng, seed: Record<string, unknown>, endpoint: Endpoint): Body => {
  const json = (value: unknown) => Buffer.from(JSON.stringify(value))
  const fields = Object.keys(seed)
  const required = REQUIRED[endpoint] ?? []
  const invalid = ["InvalidRequest"]
  const how = rng.weighted<string>([
    [3, "valid"],
    [2, "drop-required"],
    [2, "extra-field"],
    [3, "invalid-field"],
    [1, "odd-field"],
    [1, "huge-number"],
    [1, "deep"],
    [1, "top-level"],
    [1, "not-json"],
    [1, "invalid-utf8"],
    [1, "bom"],
    [1, "empty"],
    [1, "too-large"],
    [0.5, "too-large-chunked"],
    [1, "near-limit"],
    [1, "duplicate-key"],
    [1, "text-mutation"]
  ])
  switch (how) {
    case "valid":
      return { bytes: json(seed), how }
    case "drop-required": {
      if (required.length === 0) return { bytes: json(seed), how }
      const drop = rng.pick(required)
      const { [drop]: _, ...rest } = seed
      return { bytes: json(rest), how: `${how} ${drop}`, labels: invalid }
    }
    case "extra-field":
      return { bytes: json({ ...seed, [rng.pick(["extra", "Worker", "__proto__x", "constructor", ""])]: oddValue(rng) }), how, labels: invalid }
    case "invalid-field": {
      const field = rng.pick(fields.length > 0 ? [...fields, ...(endpoint === "register" ? ["draining"] : []), ...(endpoint === "heartbeat" ? ["degraded"] : [])] : ["x"])
      return { bytes: json({ ...seed, [field]: invalidValue(rng, field) }), how: `${how} ${field}`, labels: fields.length > 0 ? invalid : undefined }
    }
    case "odd-field": {
      const field = rng.pick(fields.length > 0 ? fields : ["x"])
      return { bytes: json({ ...seed, [field]: oddValue(rng) }), how: `${how} ${field}` }
    }
    case "huge-number": {
      if (!("headroom" in seed)) return { bytes: json(seed), how }
      const number = rng.pick(["1e308", "1e400", "-1e400", "123456789012345678901234567890", "0.0000000000000000001", "-0", "1E2"])
      const text = JSON.stringify({ ...seed, headroom: "__N__" }).replace('"__N__"', number)
      // 1e400 parses as Infinity (not finite); -1e400 as -Infinity.
      const labels = number.includes("e400") ? invalid : undefined
      return { bytes: Buffer.from(text), how: `${how} ${number}`, ...(labels === undefined ? {} : { labels }) }
    }
    case "deep": {
      const field = rng.pick(fields.length > 0 ? fields : ["x"])
      const depth = rng.range(100, 20000)
      const text = JSON.stringify({ ...seed, [field]: "__D__" }).replace('"__D__"', "[".repeat(depth) + "]".repeat(depth))
      const bytes = Buffer.from(text)
      return { bytes, how: `${how} ${depth}`, labels: bytes.length > 64 * 1024 ? ["BodyTooLarge"] : fields.length > 0 ? invalid : undefined }
    }
    case "top-level":
      return { bytes: Buffer.from(rng.pick(["[]", "[{}]", "\"x\"", "1", "null", "true", JSON.stringify([seed])])), how, labels: invalid }
    case "not-json": {
      const text = JSON.stringify(seed)
      return { bytes: Buffer.from(text.slice(0, rng.int(text.length))), how, labels: invalid }
    }
    case "invalid-utf8": {
      const text = JSON.stringify(seed)
      const at = text.indexOf('"', text.indexOf(":") + 1) + 1
      const bytes = Buffer.concat([Buffer.from(text.slice(0, at)), Buffer.from(rng.pick([[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x80]])), Buffer.from(text.slice(at))])
      return { bytes, how }
    }
    case "bom":
      return { bytes: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), json(seed)]), how, labels: invalid }
    case "empty":
      return { bytes: Buffer.alloc(0), how, labels: invalid }
    case "too-large":
      return { bytes: json({ ...seed, pad: "p".repeat(rng.range(64 * 1024, 300 * 1024)) }), how, labels: ["BodyTooLarge"] }
    case "too-large-chunked":
      return { bytes: Buffer.from(" ".repeat(rng.range(64 * 1024 + 1, 200 * 1024)) + JSON.stringify(seed)), how, labels: ["BodyTooLarge"], chunked: true }
    case "near-limit": {
      // Whitespace up to just under or just over 64 KiB.
      const text = JSON.stringify(seed)
      const total = 64 * 1024 + rng.range(-3, 3)
      const bytes = Buffer.from(" ".repeat(Math.max(0, total - text.length)) + text)
      return { bytes, how: `${how} ${bytes.length}`, ...(bytes.length > 64 * 1024 ? { labels: ["BodyTooLarge"] } : {}) }
    }
    case "duplicate-key": {
      const text = JSON.stringify(seed)
      return { bytes: Buffer.from(`${text.slice(0, -1)},"${rng.pick(fields.length > 0 ? fields : ["x"])}":${JSON.stringify(oddValue(rng))}}`), how }
    }
    default:
      return { bytes: Buffer.from(mutateText(rng, JSON.stringify(seed), rng.range(1, 5))), how }
  }
}

const encodeSegment = (rng: Rng, value: string): string => (rng.chance(0.1) ? encodeURIComponent(value) : value)

export const registryInput = (rng: Rng, world: World): Input => {
  const endpoint = rng.weighted<Endpoint>([
    [5, "register"],
    [4, "heartbeat"],
    [1, "deregister"],
    [2, "release"],
    [2, "tag"],
    [2, "placement"],
    [1, "workers"],
    [1, "unknown-route"],
    [1, "wrong-method"]
  ])
  const tokenKind = rng.weighted<string>([
    [16, "right"],
    [1, "none"],
    [1, "wrong"],
    [0.5, "lowercase"],
    [0.3, "basic"],
    [0.3, "two-spaces"],
    [0.3, "bare"],
    [0.3, "empty"]
  ])
  const authorization = {
    right: `Bearer ${TOKEN}`,
    none: undefined,
    wrong: `Bearer ${mutateText(rng, TOKEN, rng.range(1, 3))}`,
    lowercase: `bearer ${TOKEN}`,
    basic: `Basic ${Buffer.from(`x:${TOKEN}`).toString("base64")}`,
    "two-spaces": `Bearer  ${TOKEN}`,
    bare: TOKEN,
    empty: "Bearer "
  }[tokenKind]
  const headers: Array<[string, string]> = []
  if (authorization !== undefined) headers.push(["Authorization", authorization])
  if (rng.chance(0.9)) headers.push(["Content-Type", rng.pick(["application/json", "application/json", "text/plain", "application/json; charset=latin1"])])

  let method = "POST"
  let path: string
  let body: Body | undefined
  let labels: ReadonlyArray<string> | undefined
  let learn: ((observation: Observation) => void) | undefined
  const fuzzWorker = world.fuzzWorkers.length > 0 && rng.chance(0.8) ? rng.pick(world.fuzzWorkers).worker : `fzr-${freshId(rng)}`
  switch (endpoint) {
    case "register": {
      path = "/registry/workers"
      const seed = seedBody(rng, world, endpoint)
      body = mutateBody(rng, seed, endpoint)
      labels = body.labels ?? (body.how === "valid" ? ["registry 200"] : undefined)
      const worker = seed.worker as string
      if (body.how === "valid") {
        learn = (observation) => {
          const response = observation.responses[0]
          if (response?.status !== 200) return
          try {
            const answer = JSON.parse(response.body.toString()) as { incarnation?: string }
            if (typeof answer.incarnation === "string") {
              world.fuzzWorkers.push({ worker, incarnation: answer.incarnation })
              if (world.fuzzWorkers.length > 200) world.fuzzWorkers.splice(0, world.fuzzWorkers.length - 200)
            }
          } catch {
            // not JSON: the classification reports it
          }
        }
      }
      break
    }
    case "heartbeat": {
      const worker = rng.chance(0.1) ? rng.pick(["", "a%20b", "x".repeat(129), "%zz", "..", ".", "fzr-%41"]) : fuzzWorker
      path = `/registry/workers/${encodeSegment(rng, worker)}/heartbeat`
      body = mutateBody(rng, seedBody(rng, world, endpoint), endpoint)
      const badWorker = !/^[A-Za-z0-9._~-]{1,128}$/.test(decodeURIComponentSafe(worker))
      labels = worker === "" ? ["RouteNotFound", "InvalidRequest"] : badWorker ? ["InvalidRequest"] : body.labels ?? (body.how === "valid" ? ["registry 200", "LeaseLost"] : undefined)
      break
    }
    case "deregister": {
      method = "DELETE"
      const incarnation = rng.pick([undefined, "", "wrong", "a b", rng.chars(20, ID_ALPHABET)])
      path = `/registry/workers/${fuzzWorker}${incarnation === undefined ? "" : `?incarnation=${encodeURIComponent(incarnation)}`}`
      labels = incarnation === undefined || incarnation === "" || incarnation === "a b" ? ["InvalidRequest"] : ["registry 204"]
      break
    }
    case "release":
    case "tag": {
      path = `/registry/${endpoint}`
      body = mutateBody(rng, seedBody(rng, world, endpoint), endpoint)
      labels = body.labels ?? (body.how === "valid" ? ["registry 200", "registry 409"] : undefined)
      break
    }
    case "placement": {
      method = rng.pick(["GET", "GET", "HEAD"])
      const namespace = rng.pick(["open", "fz1", "opt", "", "a%20b", "n".repeat(129), "%6Fpen"])
      const id = rng.chance(0.7) ? pooledId(rng) : rng.pick(["", "a!b", "x".repeat(257), "%41"])
      const env = rng.pick([undefined, "", "prod", "a b", "x".repeat(129)])
      path = `/registry/placements/${namespace}/${id}${env === undefined ? "" : `?env=${encodeURIComponent(env)}`}`
      const okNs = /^[A-Za-z0-9._~-]{1,128}$/.test(decodeURIComponentSafe(namespace))
      const okId = /^[A-Za-z0-9._~-]{1,256}$/.test(decodeURIComponentSafe(id))
      const okEnv = env === undefined || /^[A-Za-z0-9._~-]{0,128}$/.test(env)
      labels = okNs && okId && okEnv ? ["registry 200", "NotPlaced"] : ["InvalidRequest"]
      break
    }
    case "workers":
      method = rng.pick(["GET", "HEAD"])
      path = "/registry/workers"
      labels = ["registry 200"]
      break
    case "unknown-route":
      method = rng.pick(["GET", "POST", "DELETE"])
      path = rng.pick(["/registry", "/registry/", "/registry/nope", "/registry/workers/a/b/c", "/registry/release/x", "/registry/placements/a", "/registry/workers/a/heartbeat/x", "/registry//workers"])
      labels = ["RouteNotFound"]
      break
    default: {
      const [m, p] = rng.pick<[string, string]>([
        ["PUT", "/registry/workers"],
        ["DELETE", "/registry/release"],
        ["GET", "/registry/tag"],
        ["POST", "/registry/placements/open/x"],
        ["GET", `/registry/workers/${fuzzWorker}/heartbeat`],
        ["PATCH", "/registry/workers"],
        ["POST", `/registry/workers/${fuzzWorker}`],
        ["OPTIONS", "/registry/workers"]
      ])
      method = m
      path = p
      labels = ["MethodNotAllowed"]
    }
  }
  if (body?.chunked === true) headers.push(["Transfer-Encoding", "chunked"])
  // Without the right token nothing else is looked at (docs/registry-api.md).
  if (tokenKind !== "right") labels = tokenKind === "lowercase" ? undefined : ["InvalidDeploymentToken"]
  return {
    category: "registry",
    variant: `${endpoint}${body === undefined ? "" : ` ${body.how.split(" ")[0]}`}`,
    send: { kind: "http", request: { method, path, headers, ...(body === undefined ? {} : { body: body.bytes }) } },
    context: { method, path, upgrade: false },
    expect: expectHttp(labels ?? (tokenKind === "lowercase" ? [...ANY_REGISTRY, "InvalidDeploymentToken"] : ANY_REGISTRY)),
    ...(learn === undefined ? {} : { learn })
  }
}

const decodeURIComponentSafe = (segment: string): string => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}
