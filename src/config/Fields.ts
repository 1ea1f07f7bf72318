// Field schemas of the configuration (docs/config.md). Each carries the "expected …"
// half of its error message; the loader prefixes the field and appends what it got.
import { Effect, Schema, SchemaGetter, SchemaIssue, SchemaTransformation } from "effect"
import type { LogLevelName } from "../serving/LogLine.js"
import { isAddressOrRange } from "../serving/TrustedProxies.js"
import { isHttpUrl } from "../serving/Otlp.js"

/**
 * Message annotation for a leaf: it stands for any failure of the value, a failing check as
 * well as the wrong type (a string where a number belongs). Read by config/Messages.ts.
 */
export const expected = (what: string) => ({ message: `expected ${what}`, override: true })

/** Message annotation for a container: only for the container itself (the wrong type, its own check), so nested messages still show. */
export const expectedShape = (what: string) => ({ message: `expected ${what}` })

/** A struct that is also told apart from what is not an object (a list included), with that message. */
export const objectOf = <S extends Schema.Top>(struct: S): S["Rebuild"] => struct.annotate(expectedShape("an object"))

/** setTimeout keeps its delay in a signed 32-bit integer; a larger one fires at once. */
export const MAX_TIMER_MS = 2_147_483_647

export const integer = (min: number, max: number, what = `an integer from ${min} to ${max}`) =>
  Schema.Number.check(Schema.makeFilter((n: number) => Number.isInteger(n) && n >= min && n <= max, expected(what)))

export const NonEmptyString = Schema.String.check(Schema.makeFilter((s: string) => s.length > 0, expected("a non-empty string")))

export const Port = integer(1, 65535)
export const Buckets = integer(1, 16384)
export const LeaseMs = integer(1000, MAX_TIMER_MS)
export const PositiveMs = integer(1, MAX_TIMER_MS, `a positive integer of milliseconds (at most ${MAX_TIMER_MS})`)
export const NonNegativeMs = integer(0, MAX_TIMER_MS, `an integer of milliseconds from 0 to ${MAX_TIMER_MS}`)
export const PositiveInt = integer(1, Number.MAX_SAFE_INTEGER, "a positive integer")
/** An HTTP/2 SETTINGS value or a count under one: a 31-bit positive integer (RFC 9113 6.5.2). */
export const Http2Limit = integer(1, 2 ** 31 - 1, `a positive integer (at most ${2 ** 31 - 1})`)
export const BalanceFactor = Schema.Number.check(
  Schema.makeFilter((n: number) => Number.isFinite(n) && n >= 1, expected("a finite number >= 1"))
)
export const Flag = Schema.Boolean.annotate(expected("true or false"))
/** The log levels of serving/LogLine.ts, as a setting. */
export const LogLevelSetting = Schema.Literals(["debug", "info", "warning", "error"]).annotate(
  expected("one of debug, info, warning, error")
) satisfies Schema.Codec<LogLevelName>
export const Token = Schema.RedactedFromValue(NonEmptyString)

const urlWithProtocol = (s: string, protocols: ReadonlyArray<string>): boolean => {
  try {
    return protocols.includes(new URL(s).protocol)
  } catch {
    return false
  }
}

export const RedisUrl = Schema.String.check(
  Schema.makeFilter((s: string) => urlWithProtocol(s, ["redis:", "rediss:"]), expected("a redis:// or rediss:// URL"))
)

/** Where traces go (OTLP/HTTP); spans are POSTed to `<endpoint>/v1/traces`. */
export const OtlpEndpoint = Schema.String.check(Schema.makeFilter(isHttpUrl, expected("an http:// or https:// URL")))
export const SampleRatio = Schema.Number.check(
  Schema.makeFilter((n: number) => Number.isFinite(n) && n >= 0 && n <= 1, expected("a number from 0 to 1"))
)

const HOST_PORT = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/
const isHostPort = (s: string): boolean => {
  const port = HOST_PORT.exec(s)?.[1]
  return port !== undefined && Number(port) >= 1 && Number(port) <= 65535
}
export const HostPort = Schema.String.check(Schema.makeFilter(isHostPort, expected("host:port")))
/** Redis Cluster seed nodes, or Redis Sentinels. */
export const RedisNodes = Schema.Array(HostPort).check(
  Schema.makeFilter((a: ReadonlyArray<string>) => a.length > 0, expectedShape("a non-empty list of host:port"))
)
/** A trusted proxy: an IPv4 or IPv6 address, or a CIDR range of either (docs/deploy.md "Behind a load balancer"). */
export const ProxyAddress = Schema.String.check(
  Schema.makeFilter(isAddressOrRange, expected("an IP address or a CIDR range (10.0.0.0/8, fd00::/8)"))
)

/** A Redis or Sentinel password (an ACL user's, or `requirepass`'s). */
export const RedisPassword = Schema.RedactedFromValue(NonEmptyString)
/** A file read at start (a mounted secret, a PEM certificate or key). */
export const FilePath = NonEmptyString

// Every Redis key carries the hash tag `{<prefix>:<bucket>}` (docs/protocol.md); a brace would break it.
export const RedisPrefix = Schema.String.check(
  Schema.makeFilter((s: string) => s.length > 0 && !/[{}]/.test(s), expected("a non-empty string without { or }"))
)

export const Takeover = Schema.Literals(["wind_down", "deny"]).annotate(expected(`"wind_down" or "deny"`))
export type Takeover = typeof Takeover.Type

/** An env not configured otherwise takes over with a wind-down (docs/proxy.md "Hostname-aware mode"). */
export const DEFAULT_TAKEOVER: Takeover = "wind_down"

/** RFC 9110 token: what a header or cookie name may be made of. */
const HTTP_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const isToken = (s: string): boolean => HTTP_TOKEN.test(s)

/** A header name, lowercased as Node presents incoming headers. */
export const HeaderName = Schema.String.check(Schema.makeFilter(isToken, expected("a header name"))).pipe(
  Schema.decodeTo(Schema.String, SchemaTransformation.toLowerCase())
)
export const CookieName = Schema.String.check(Schema.makeFilter(isToken, expected("a cookie name")))

const AffinityKeyType = Schema.Union([
  Schema.TaggedStruct("ip", {}),
  Schema.TaggedStruct("header", { name: Schema.String }),
  Schema.TaggedStruct("cookie", { name: Schema.String })
])
export type AffinityKey = typeof AffinityKeyType.Type

const parseAffinityKey = (s: string): AffinityKey | undefined => {
  if (s === "ip") return { _tag: "ip" }
  const colon = s.indexOf(":")
  const kind = s.slice(0, colon)
  const name = s.slice(colon + 1)
  if (colon < 0 || !isToken(name)) return undefined
  if (kind === "header") return { _tag: "header", name: name.toLowerCase() }
  if (kind === "cookie") return { _tag: "cookie", name }
  return undefined
}

const affinityKeyExpected = expected("ip, header:<name> or cookie:<name>")

/** `ip`, `header:<name>` (name lowercased) or `cookie:<name>`. */
export const AffinityKeyFromString = Schema.String.annotate(affinityKeyExpected).pipe(
  Schema.decodeTo(AffinityKeyType, {
    decode: SchemaGetter.transformEffect((s: string) => {
      const key = parseAffinityKey(s)
      return key === undefined ? Effect.fail(new SchemaIssue.InvalidValue(affinityKeyExpected)) : Effect.succeed(key)
    }),
    encode: SchemaGetter.transform((key: AffinityKey) => (key._tag === "ip" ? "ip" : `${key._tag}:${key.name}`))
  })
)
