// The registry API's request bodies and path parameters (docs/registry-api.md), as Schemas whose
// failures name the field and what was expected.
import { Result, Schema, type SchemaAST, SchemaIssue } from "effect"
import { isValidId, isValidNamespace } from "../Address.js"
import { isEpoch } from "../contract/Epochs.js"
import { InvalidRequest } from "../Errors.js"

/** The message for any failure of the field. */
const expectedField = (what: string) => ({ message: `expected ${what}` })

/**
 * `base` refined by `checks`, every failure of it told as `expected <what>`, its type included:
 * the message on `base` answers a value of the wrong type, the one on each check a bad value.
 */
const format = <T>(base: Schema.Codec<T>, what: string, check: SchemaAST.Filter<T>, ...more: Array<SchemaAST.Filter<T>>) => {
  const told = (each: SchemaAST.Filter<T>) => each.annotate(expectedField(what))
  return base.annotate(expectedField(what)).check(told(check), ...more.map(told))
}

const pattern = (regExp: RegExp, what: string) => format(Schema.String, what, Schema.isPattern(regExp))
const satisfying = (predicate: (s: string) => boolean, what: string) => format(Schema.String, what, Schema.makeFilter(predicate))

export const WorkerId = pattern(/^[A-Za-z0-9._~-]{1,128}$/, "1-128 characters of [A-Za-z0-9._~-]")
// The same rules as request paths (docs/proxy.md "Addressing").
export const Namespace = satisfying(isValidNamespace, '"/" followed by 1-128 characters of [A-Za-z0-9._~-]')
export const InstanceId = satisfying(isValidId, "1-256 characters of [A-Za-z0-9._~-]")
export const EnvName = pattern(/^[A-Za-z0-9._~-]{0,128}$/, "0-128 characters of [A-Za-z0-9._~-]")
/** `GET /registry/workers?limit=`: a decimal integer from 1 to 1000, no sign or leading zero. */
export const PageLimit = pattern(/^(?:[1-9][0-9]{0,2}|1000)$/, "an integer from 1 to 1000")
/** `GET /registry/workers?cursor=`: a worker id (see RegistryApi.ts), checked as one. */
export const Cursor = pattern(/^[A-Za-z0-9._~-]{1,128}$/, 'a cursor as answered in "next"')
export const Epoch = satisfying(isEpoch, "an epoch: a decimal string")
export const Headroom = format(Schema.Number, "a finite number >= 0", Schema.isFinite(), Schema.isGreaterThanOrEqualTo(0))
export const Incarnation = pattern(/^[A-Za-z0-9._~-]{1,128}$/, "an incarnation as returned by register")
const BodyFlag = Schema.Boolean.annotate(expectedField("true or false"))
/** No lone UTF-16 surrogates: Redis stores UTF-8, so such a string would not read back as sent. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
const isWellFormed = (s: string): boolean => !LONE_SURROGATE.test(s)

const Tag = satisfying((s) => isWellFormed(s) && Buffer.byteLength(s, "utf8") <= 1024, "well-formed text of at most 1 KiB")

const isAdvertiseUrl = (s: string): boolean => {
  if (!isWellFormed(s) || !URL.canParse(s)) return false
  const url = new URL(s)
  return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "" && !s.includes("?") && !s.includes("#")
}
export const AdvertiseUrl = satisfying(isAdvertiseUrl, "an absolute http: or https: URL without query or fragment")

/** A hostname as the Host header names it: letters, digits, dots and hyphens, no port. */
export const Hostname = pattern(/^[A-Za-z0-9.-]{1,253}$/, "a hostname: 1-253 characters of [A-Za-z0-9.-], without a port")

/**
 * Hostname-aware mode: a namespace served for one hostname, in one env (docs/registry-api.md,
 * docs/proxy.md "Hostname-aware mode"). The message answers a value that is no such object; a
 * bad field is reported as the field.
 */
export const HostnameRegistration = Schema.Struct({ namespace: Namespace, hostname: Hostname, env: EnvName }).annotate({
  message: 'expected an object {"namespace","hostname","env"}'
})

// The list's own messages answer a value that is no list and a list of the wrong length; a bad
// element is reported as namespaces[i].
const boundedListOf = <S extends Schema.Top>(entry: S, what: string) =>
  Schema.Array(entry)
    .annotate({ message: `expected a list of ${what}` })
    .check(Schema.makeFilter((list) => list.length >= 1 && list.length <= 1024, { message: `expected a list of 1-1024 ${what}` }))

const registerFields = {
  worker: WorkerId,
  advertiseUrl: AdvertiseUrl,
  headroom: Headroom,
  draining: Schema.optionalKey(BodyFlag),
  epoch: Schema.optionalKey(Epoch)
}

export const RegisterBody = Schema.Struct({ ...registerFields, namespaces: boundedListOf(Namespace, "namespaces") })

/** In hostname-aware mode every entry names its hostname and env. */
export const HostnameRegisterBody = Schema.Struct({
  ...registerFields,
  namespaces: boundedListOf(HostnameRegistration, "namespace registrations")
})

export const HeartbeatBody = Schema.Struct({
  incarnation: Incarnation,
  headroom: Headroom,
  draining: Schema.optionalKey(BodyFlag),
  degraded: Schema.optionalKey(BodyFlag)
})

const PlacementFields = {
  namespace: Namespace,
  id: InstanceId,
  epoch: Epoch,
  env: Schema.optionalKey(EnvName)
}

export const ReleaseBody = Schema.Struct(PlacementFields)
export const TagBody = Schema.Struct({ ...PlacementFields, tag: Tag })

/** A missing or unknown field gets its own words; any other problem, the schema's message. */
const firstIssue = SchemaIssue.makeFormatterStandardSchemaV1({
  leafHook: (issue) =>
    issue._tag === "MissingKey" ? "is required" : issue._tag === "UnexpectedKey" ? "is not a known field" : SchemaIssue.defaultLeafHook(issue)
})

/** The first problem as `<field>: <what was expected>`. */
const describe = (error: Schema.SchemaError, subject: string): string => {
  const issue = firstIssue(error.issue).issues[0]
  if (issue === undefined) return `${subject}: invalid`
  const path = issue.path ?? []
  const field = path.length === 0 ? subject : path.map((p) => (typeof p === "number" ? `[${p}]` : String(p))).join(".").replace(/\.\[/g, "[")
  return `${field}: ${issue.message}`
}

const options = { onExcessProperty: "error", errors: "first" } as const

export const decodeBody = <A>(schema: Schema.Decoder<A>, input: unknown): Result.Result<A, InvalidRequest> => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    return Result.fail(new InvalidRequest({ problem: "body: expected a JSON object" }))
  }
  return Result.mapError(
    Schema.decodeUnknownResult(schema, options)(input),
    (error) => new InvalidRequest({ problem: describe(error, "body") })
  )
}

/** Checks one path or query parameter. */
export const decodeParam = <A>(schema: Schema.Codec<A, string>, name: string, value: string | null): Result.Result<A, InvalidRequest> =>
  value === null
    ? Result.fail(new InvalidRequest({ problem: `${name}: is required` }))
    : Result.mapError(
    Schema.decodeUnknownResult(schema)(value),
    (error) => new InvalidRequest({ problem: describe(error, name) })
  )
