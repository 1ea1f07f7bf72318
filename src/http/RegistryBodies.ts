// The registry API's request bodies and path parameters (docs/registry-api.md), as Schemas whose
// failures name the field and what was expected.
import { Either, ParseResult, Schema } from "effect"
import { isValidId, isValidNamespace } from "../Address.js"
import { isEpoch } from "../contract/Epochs.js"
import { InvalidRequest } from "../Errors.js"

/** The message for any failure of the field, its type included. */
const expected = (what: string) => ({ message: () => ({ message: `expected ${what}`, override: true }) })

export const WorkerId = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._~-]{1,128}$/)).annotations(
  expected("1-128 characters of [A-Za-z0-9._~-]")
)
// The same rules as request paths (docs/proxy.md "Addressing").
export const Namespace = Schema.String.pipe(Schema.filter(isValidNamespace)).annotations(
  expected('"/" followed by 1-128 characters of [A-Za-z0-9._~-]')
)
export const InstanceId = Schema.String.pipe(Schema.filter(isValidId)).annotations(expected("1-256 characters of [A-Za-z0-9._~-]"))
export const Env = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._~-]{0,128}$/)).annotations(
  expected("0-128 characters of [A-Za-z0-9._~-]")
)
/** `GET /registry/workers?limit=`: a decimal integer from 1 to 1000, no sign or leading zero. */
export const PageLimit = Schema.String.pipe(Schema.pattern(/^(?:[1-9][0-9]{0,2}|1000)$/)).annotations(
  expected("an integer from 1 to 1000")
)
/** `GET /registry/workers?cursor=`: a worker id (see RegistryApi.ts), checked as one. */
export const Cursor = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._~-]{1,128}$/)).annotations(
  expected('a cursor as answered in "next"')
)
export const Epoch = Schema.String.pipe(Schema.filter(isEpoch)).annotations(
  expected("an epoch: a decimal string")
)
export const Headroom = Schema.Number.pipe(Schema.finite(), Schema.greaterThanOrEqualTo(0)).annotations(
  expected("a finite number >= 0")
)
export const Incarnation = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._~-]{1,128}$/)).annotations(
  expected("an incarnation as returned by register")
)
const Flag = Schema.Boolean.annotations(expected("true or false"))
/** No lone UTF-16 surrogates: Redis stores UTF-8, so such a string would not read back as sent. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
const isWellFormed = (s: string): boolean => !LONE_SURROGATE.test(s)

const Tag = Schema.String.pipe(Schema.filter((s) => isWellFormed(s) && Buffer.byteLength(s, "utf8") <= 1024)).annotations(
  expected("well-formed text of at most 1 KiB")
)

const isAdvertiseUrl = (s: string): boolean => {
  if (!isWellFormed(s) || !URL.canParse(s)) return false
  const url = new URL(s)
  return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "" && !s.includes("?") && !s.includes("#")
}
export const AdvertiseUrl = Schema.String.pipe(Schema.filter(isAdvertiseUrl)).annotations(
  expected("an absolute http: or https: URL without query or fragment")
)

/** A hostname as the Host header names it: letters, digits, dots and hyphens, no port. */
export const Hostname = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9.-]{1,253}$/)).annotations(
  expected("a hostname: 1-253 characters of [A-Za-z0-9.-], without a port")
)

/** Hostname-aware mode: a namespace served for one hostname, in one env (docs/registry-api.md, docs/proxy.md "Hostname-aware mode"). */
export const HostnameRegistration = Schema.Struct({ namespace: Namespace, hostname: Hostname, env: Env }).annotations({
  message: () => 'expected an object {"namespace","hostname","env"}'
})

// Messages without override here, so that a bad element is reported as namespaces[i].
const listOf = <A, I>(entry: Schema.Schema<A, I>, what: string) =>
  Schema.Array(entry)
    .annotations({ message: () => `expected a list of ${what}` })
    .pipe(Schema.filter((list) => list.length >= 1 && list.length <= 1024, { message: () => `expected a list of 1-1024 ${what}` }))

const registerFields = {
  worker: WorkerId,
  advertiseUrl: AdvertiseUrl,
  headroom: Headroom,
  draining: Schema.optionalWith(Flag, { exact: true }),
  epoch: Schema.optionalWith(Epoch, { exact: true })
}

export const RegisterBody = Schema.Struct({ ...registerFields, namespaces: listOf(Namespace, "namespaces") })

/** In hostname-aware mode every entry names its hostname and env. */
export const HostnameRegisterBody = Schema.Struct({
  ...registerFields,
  namespaces: listOf(HostnameRegistration, "namespace registrations")
})

export const HeartbeatBody = Schema.Struct({
  incarnation: Incarnation,
  headroom: Headroom,
  draining: Schema.optionalWith(Flag, { exact: true }),
  degraded: Schema.optionalWith(Flag, { exact: true })
})

const PlacementFields = {
  namespace: Namespace,
  id: InstanceId,
  epoch: Epoch,
  env: Schema.optionalWith(Env, { exact: true })
}

export const ReleaseBody = Schema.Struct(PlacementFields)
export const TagBody = Schema.Struct({ ...PlacementFields, tag: Tag })

/** The first problem as `<field>: <what was expected>`. */
const describe = (error: ParseResult.ParseError, subject: string): string => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  if (issue === undefined) return `${subject}: invalid`
  const field = issue.path.length === 0 ? subject : issue.path.map((p) => (typeof p === "number" ? `[${p}]` : String(p))).join(".").replace(/\.\[/g, "[")
  const message = issue._tag === "Missing" ? "is required" : issue._tag === "Unexpected" ? "is not a known field" : issue.message
  return `${field}: ${message}`
}

const options = { onExcessProperty: "error", errors: "first" } as const

export const decodeBody = <A, I>(schema: Schema.Schema<A, I>, input: unknown): Either.Either<A, InvalidRequest> => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    return Either.left(new InvalidRequest({ problem: "body: expected a JSON object" }))
  }
  return Either.mapLeft(
    Schema.decodeUnknownEither(schema, options)(input),
    (error) => new InvalidRequest({ problem: describe(error, "body") })
  )
}

/** Checks one path or query parameter. */
export const decodeParam = <A>(schema: Schema.Schema<A, string>, name: string, value: string | null): Either.Either<A, InvalidRequest> =>
  value === null
    ? Either.left(new InvalidRequest({ problem: `${name}: is required` }))
    : Either.mapLeft(
    Schema.decodeUnknownEither(schema)(value),
    (error) => new InvalidRequest({ problem: describe(error, name) })
  )
