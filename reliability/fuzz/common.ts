// What every generator shares: the Input shape, raw request building, the id pool, the
// reference answer of a well-formed instance request under the fuzz config's rules, and the
// checks of the worker's echo.
import type { Classified, Context } from "./catalogue.js"
import { SERVED, WORKER_IDS } from "./fleet.js"
import { ID_ALPHABET, type Rng } from "../prng.js"
import type { Placed } from "./tokens.js"
import type { After, HttpRequest, Observation, Part, Response } from "./wire.js"

export const CATEGORIES = [
  "request-line",
  "path",
  "headers",
  "body",
  "registry",
  "jws",
  "attestation",
  "stop",
  "websocket",
  "mutation"
] as const
export type Category = (typeof CATEGORIES)[number]

export type Send =
  | { readonly kind: "raw"; readonly parts: ReadonlyArray<Part>; readonly after: After; readonly headRequest: boolean; readonly pauseReadingMs?: number }
  | { readonly kind: "http"; readonly request: HttpRequest }

export interface Input {
  readonly category: Category
  /** The variant, for the report. */
  readonly variant: string
  readonly send: Send
  readonly context: Context
  /** A check beyond "no 500, every answer classified": a string says what was wrong. */
  readonly expect?: (observation: Observation, classified: ReadonlyArray<Classified>) => string | undefined
  /** Learns from the answer (registrations, say). */
  readonly learn?: (observation: Observation) => void
}

/** What the generators know about the running fleet. */
export interface World {
  readonly port: number
  readonly host: string
  readonly workerPorts: ReadonlyArray<number>
  /** Instances placed before the run (control ids), with their worker and epoch. */
  placed: ReadonlyArray<Placed>
  /** Workers the registry inputs registered (`fzr-*`), with their incarnations; bounded. */
  readonly fuzzWorkers: Array<{ readonly worker: string; readonly incarnation: string }>
}

// ---- raw requests ---------------------------------------------------------------------------

export interface RawRequest {
  readonly method: string
  readonly target: string
  readonly version?: string
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly body?: Buffer
  readonly eol?: string
  readonly sep?: string
}

/** A request head as bytes; strings are taken as latin1 (one char, one byte). */
export const headBytes = (r: RawRequest): Buffer => {
  const eol = r.eol ?? "\r\n"
  const sep = r.sep ?? " "
  let text = `${r.method}${sep}${r.target}${sep}${r.version ?? "HTTP/1.1"}${eol}`
  for (const [name, value] of r.headers) text += `${name}: ${value}${eol}`
  return Buffer.from(text + eol, "latin1")
}

export const requestBytes = (r: RawRequest): Buffer => (r.body === undefined ? headBytes(r) : Buffer.concat([headBytes(r), r.body]))

/** UTF-8 text as the latin1 string of its bytes, for a raw head. */
export const utf8AsLatin1 = (text: string): string => Buffer.from(text, "utf8").toString("latin1")

export const readAll = (data: Buffer, method: string): Send => ({
  kind: "raw",
  parts: [{ data }],
  after: { mode: "read" },
  headRequest: method === "HEAD"
})

// ---- ids ----------------------------------------------------------------------------------------

let fresh = 0
export const freshId = (rng: Rng): string => `f${(++fresh).toString(36)}-${rng.chars(4, "abcdefghijklmnopqrstuvwxyz0123456789")}`

const POOL: Array<string> = []
/** Fills the pool of valid ids from the run's seed (once, before any input is made). */
export const initIdPool = (rng: Rng): void => {
  POOL.length = 0
  for (let i = 0; i < 1500; i++) POOL.push(rng.chars(rng.range(1, 24), ID_ALPHABET))
  POOL.push("a".repeat(256), "~".repeat(256), "..", ".", "-", "_", "~")
}
/** Valid ids, reused so that most requests find a placement already made. */
export const pooledId = (rng: Rng): string => (rng.chance(0.08) || POOL.length === 0 ? freshId(rng) : rng.pick(POOL))

/** Paths after the id that the fixture worker answers with its echo (no special routes). */
export const echoRest = (rng: Rng): string =>
  rng.pick(["/echo", "", "/", "/echo/deeper/still", "/a/b/c", "/echo;p=1", "/echo%20x", "/x.json", "/echo?x=1", "/echo?a=b&c=%ZZ", "?q=1"])

// ---- the reference answer of a well-formed instance request -------------------------------------

export type Credential =
  | "none"
  /** An HS256 token the `hs` provider accepts, with the `fuzz` scope. */
  | "hs-scoped"
  /** Accepted by `hs`, without the `fuzz` scope. */
  | "hs-unscoped"
  /** The API key of the `keys` provider (scope `fuzz`). */
  | "apikey"
  /** Rejected by every provider. */
  | "invalid"
  /** Anything: accepted or not. */
  | "unknown"

export interface Credentials {
  /** In `Authorization` (`Bearer ` or not). */
  readonly authorization?: Credential
  /** In the `session` cookie. */
  readonly cookie?: Credential
  /** In `X-Api-Key`. */
  readonly apiKeyHeader?: Credential
}

const ok = "ok"
/** The possible outcomes of one credential against one rule's providers. */
const check = (credential: Credential, accepts: ReadonlyArray<Credential>, scoped: boolean): Array<string> => {
  switch (credential) {
    case "none":
      return ["AuthenticationRequired"]
    case "invalid":
      return ["InvalidCredential"]
    case "unknown":
      return [ok, "InvalidCredential", ...(scoped ? ["InsufficientScope"] : [])]
    default:
      if (!accepts.includes(credential)) return ["InvalidCredential"]
      return scoped && credential === "hs-unscoped" ? ["InsufficientScope"] : [ok]
  }
}

export interface IdVerdict {
  readonly error?: "IdEmpty" | "IdTooLong" | "IdBadCharacters"
}

const UNRESERVED = /^[A-Za-z0-9._~-]*$/
export const idVerdict = (id: string): IdVerdict =>
  id === "" ? { error: "IdEmpty" } : id.length > 256 ? { error: "IdTooLong" } : UNRESERVED.test(id) ? {} : { error: "IdBadCharacters" }

/**
 * The labels a well-formed, non-upgrade request to `/{namespace}/{id}...` may get, in the check
 * order of docs/proxy.md, without a Pinboard-Caller. `worker 200` for the echo.
 */
export const expectedLabels = (namespace: string, id: string, credentials: Credentials): Array<string> => {
  const verdict = idVerdict(id)
  if (verdict.error !== undefined) return [verdict.error]
  if (!/^\/[A-Za-z0-9._~-]{1,128}$/.test(namespace)) return ["UnknownNamespace"]
  let admitted: Array<string>
  const served = (SERVED as ReadonlyArray<string>).includes(namespace)
  switch (namespace) {
    case "/open":
      admitted = [ok]
      break
    case "/auth":
      admitted = check(credentials.authorization ?? "none", ["hs-scoped", "hs-unscoped", "apikey"], true)
      break
    case "/opt":
      admitted = credentials.cookie === undefined || credentials.cookie === "none" ? [ok] : check(credentials.cookie, ["hs-scoped", "hs-unscoped"], false)
      break
    case "/calls":
      admitted = check(credentials.authorization ?? "none", ["hs-scoped", "hs-unscoped"], false)
      break
    default:
      admitted = check(credentials.apiKeyHeader ?? "none", ["apikey"], false)
  }
  return admitted.flatMap((outcome) =>
    outcome !== ok
      ? [outcome]
      : served
      ? ["worker 200"]
      : namespace.startsWith("/fz")
      ? // Namespaces of workers the registry inputs registered: alive, lapsed, or at a dead port.
        ["worker 200", "NoLiveBackends", "UnknownNamespace", "BadGateway"]
      : ["UnknownNamespace"]
  )
}

// ---- checks -------------------------------------------------------------------------------------

export interface Echo {
  readonly worker: string
  readonly method: string
  readonly url: string
  readonly headers: Record<string, string | Array<string>>
  readonly bodyBytes: number
  readonly bodySha256: string
}

export const echoOf = (response: Response): Echo | undefined => {
  try {
    const echo = JSON.parse(response.body.toString("utf8")) as Echo
    return typeof echo === "object" && echo !== null && typeof echo.url === "string" ? echo : undefined
  } catch {
    return undefined
  }
}

export interface EchoCheck {
  readonly method?: string
  /** The path and query the worker must have received, byte for byte (latin1 as node:http reads it). */
  readonly url?: string
  readonly bodyBytes?: number
  readonly bodySha256?: string
  /** Headers the worker must not have received (lowercase). */
  readonly absent?: ReadonlyArray<string>
  /** Header values a client sent that must not reach the worker under any name. */
  readonly neverForwarded?: ReadonlyArray<string>
  /** Headers the worker must have received with exactly this value. */
  readonly equal?: Readonly<Record<string, string>>
}

/** The worker's echo against what Pinboard must have forwarded (docs/proxy.md "Forwarding"). */
export const checkEcho = (response: Response, check: EchoCheck): string | undefined => {
  const echo = echoOf(response)
  if (echo === undefined) return "the worker's 200 is not its echo"
  if (!(WORKER_IDS as ReadonlyArray<string>).includes(echo.worker)) return `echo from an unknown worker ${echo.worker}`
  if (check.method !== undefined && echo.method !== check.method) return `worker saw method ${echo.method}, sent ${check.method}`
  if (check.url !== undefined && echo.url !== check.url) return `worker saw url ${JSON.stringify(echo.url)}, expected ${JSON.stringify(check.url)}`
  if (check.bodyBytes !== undefined && echo.bodyBytes !== check.bodyBytes) return `worker got ${echo.bodyBytes} body bytes, sent ${check.bodyBytes}`
  if (check.bodySha256 !== undefined && echo.bodySha256 !== check.bodySha256) return "worker got a different body"
  const headers = echo.headers
  if (headers["x-forwarded-for"] !== "127.0.0.1") return `x-forwarded-for ${JSON.stringify(headers["x-forwarded-for"])}`
  if (typeof headers["pinboard-epoch"] !== "string" || !/^\d+$/.test(headers["pinboard-epoch"])) return "no Pinboard-Epoch"
  if (typeof headers["pinboard-attestation"] !== "string" || headers["pinboard-attestation"].split(".").length !== 3) return "no Pinboard-Attestation"
  for (const name of check.absent ?? []) if (headers[name] !== undefined) return `the worker received ${name}`
  for (const [name, value] of Object.entries(check.equal ?? {})) {
    if (headers[name] !== value) return `the worker received ${name}: ${JSON.stringify(headers[name])}, expected ${JSON.stringify(value)}`
  }
  for (const value of check.neverForwarded ?? []) {
    for (const [name, got] of Object.entries(headers)) {
      if ((Array.isArray(got) ? got : [got]).some((v) => v.includes(value))) return `a client's ${JSON.stringify(value.slice(0, 30))} reached the worker as ${name}`
    }
  }
  return undefined
}

/** The first answer's label must be one of `labels`; a `worker 200` is then checked as an echo. */
export const expectLabels =
  (labels: ReadonlyArray<string>, echo?: EchoCheck) =>
  (observation: Observation, classified: ReadonlyArray<Classified>): string | undefined => {
    const first = classified[0]
    if (first === undefined) {
      return observation.hung ? undefined : `no answer (expected ${labels.join(" or ")})${observation.finSent ? " after the client's FIN" : ""}`
    }
    if (!labels.includes(first.label)) return `got ${first.label}, expected ${labels.join(" or ")}`
    if (first.label === "worker 200" && echo !== undefined) return checkEcho(observation.responses[0]!, echo)
    return undefined
  }

/** Headers a well-formed raw request starts from. */
export const baseHeaders = (world: World, rng: Rng): Array<[string, string]> => {
  const headers: Array<[string, string]> = [["Host", world.host]]
  if (rng.chance(0.85)) headers.push(["Connection", "close"])
  if (rng.chance(0.3)) headers.push(["User-Agent", "pinboard-fuzz"])
  return headers
}

export const pickPlaced = (rng: Rng, world: World, namespace?: string): Placed | undefined => {
  const candidates = namespace === undefined ? world.placed : world.placed.filter((p) => p.namespace === namespace)
  return candidates.length === 0 ? undefined : rng.pick(candidates)
}
