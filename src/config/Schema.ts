// The whole configuration as one Schema (DESIGN 2): the JSON file's shape on the
// encoded side (environment values are merged into it first), PinboardConfig on
// the decoded side, defaults filled in.
import { type Redacted, Schema } from "effect"
import { NamespaceRule, Provider, type ProviderConfig } from "./Auth.js"
import {
  AffinityKeyFromString, type AffinityKey, BalanceFactor, Buckets, expectedShape, Flag, LeaseMs, LogLevelName, type LogLevelName as LogLevel,
  NonEmptyString, objectOf, Port, PositiveInt, PositiveMs, RedisCluster, RedisPrefix, RedisUrl, Takeover, Token
} from "./Fields.js"

export interface PinboardConfig {
  readonly port: number
  readonly host: string
  readonly token: Redacted.Redacted<string>
  readonly redis: {
    readonly url: string | undefined
    readonly cluster: ReadonlyArray<string> | undefined
    readonly prefix: string
  }
  readonly buckets: number
  readonly leaseMs: number
  readonly balanceFactor: number
  readonly affinity: { readonly key: AffinityKey }
  readonly hostnameAware: boolean
  /** Envs not listed take over with `wind_down`; see `takeoverOf`. */
  readonly envs: Readonly<Record<string, { readonly takeover: "wind_down" | "deny" }>>
  readonly forwards: { readonly timeoutMs: number; readonly maxInflight: number }
  readonly nack: { readonly threshold: number; readonly windowMs: number }
  readonly shutdown: { readonly graceMs: number }
  /** The Prometheus listener; off while `port` is undefined. `host` defaults to `host`. */
  readonly metrics: { readonly port: number | undefined; readonly host: string | undefined }
  /** Lowest level written; `access`: one line per instance request. */
  readonly log: { readonly level: LogLevel; readonly access: boolean }
  readonly providers: Readonly<Record<string, ProviderConfig>>
  /** `undefined`: open, every namespace admitted without a credential. */
  readonly namespaces: ReadonlyArray<NamespaceRule> | undefined
}

const exact = { exact: true } as const
const withDefault = <S extends Schema.Schema.AnyNoContext>(schema: S, value: () => Schema.Schema.Type<S>) =>
  Schema.optionalWith(schema, { exact: true, default: value })

/** An optional object whose own fields all have defaults. */
const section = <A, I>(struct: Schema.Schema<A, I>) => {
  const checked = objectOf(struct)
  return Schema.optionalWith(checked, { exact: true, default: () => Schema.decodeUnknownSync(checked)({}) })
}

const Fields = Schema.Struct({
  port: withDefault(Port, () => 8080),
  host: withDefault(NonEmptyString, () => "0.0.0.0"),
  token: Token,
  redis: section(Schema.Struct({
    url: Schema.optionalWith(RedisUrl, exact),
    cluster: Schema.optionalWith(RedisCluster, exact),
    prefix: withDefault(RedisPrefix, () => "pb")
  })),
  buckets: withDefault(Buckets, () => 16),
  leaseMs: withDefault(LeaseMs, () => 15_000),
  balanceFactor: withDefault(BalanceFactor, () => 1.25),
  affinity: section(Schema.Struct({ key: withDefault(AffinityKeyFromString, () => ({ _tag: "ip" as const })) })),
  hostnameAware: withDefault(Flag, () => false),
  envs: withDefault(
    Schema.Record({
      key: Schema.String,
      value: objectOf(Schema.Struct({ takeover: withDefault(Takeover, () => "wind_down" as const) }))
    }).annotations(expectedShape("an object")),
    () => ({})
  ),
  forwards: section(Schema.Struct({
    timeoutMs: withDefault(PositiveMs, () => 30_000),
    maxInflight: withDefault(PositiveInt, () => 1024)
  })),
  nack: section(Schema.Struct({
    threshold: withDefault(PositiveInt, () => 3),
    windowMs: Schema.optionalWith(PositiveMs, exact) // default: one lease
  })),
  shutdown: section(Schema.Struct({ graceMs: withDefault(PositiveMs, () => 10_000) })),
  metrics: section(Schema.Struct({
    port: Schema.optionalWith(Port, exact),
    host: Schema.optionalWith(NonEmptyString, exact)
  })),
  log: section(Schema.Struct({
    level: withDefault(LogLevelName, () => "info" as const),
    access: withDefault(Flag, () => false)
  })),
  providers: withDefault(
    Schema.Record({ key: Schema.String, value: Provider }).annotations(expectedShape("an object")),
    () => ({})
  ),
  namespaces: Schema.optionalWith(
    Schema.Array(NamespaceRule).annotations(expectedShape("a list of namespace rules")),
    exact
  )
}).annotations(expectedShape("a JSON object"))

type Fields = typeof Fields.Type

/** Rules that span fields; each issue points at the field to fix. */
const crossFieldIssues = (c: Fields): Array<Schema.FilterIssue> => {
  const issues: Array<Schema.FilterIssue> = []
  if (c.redis.url !== undefined && c.redis.cluster !== undefined) {
    issues.push({
      path: ["redis"],
      message: "expected either url (PINBOARD_REDIS_URL) or cluster (PINBOARD_REDIS_CLUSTER), not both"
    })
  }
  const providerNames = Object.keys(c.providers)
  const seen = new Set<string>()
  c.namespaces?.forEach((rule, i) => {
    if (seen.has(rule.namespace)) {
      issues.push({ path: ["namespaces", i, "namespace"], message: "expected a namespace no earlier rule names" })
    }
    seen.add(rule.namespace)
    rule.providers?.forEach((name, j) => {
      if (!providerNames.includes(name)) {
        issues.push({ path: ["namespaces", i, "providers", j], message: "expected the name of a provider in providers" })
      }
    })
    if (rule.auth !== "none" && (rule.providers ?? providerNames).length === 0) {
      issues.push({ path: ["namespaces", i, "providers"], message: `expected at least one provider for auth "${rule.auth}"` })
    }
    // With no credential checked there is no principal to hold them: every request would be refused.
    if (rule.auth === "none" && (rule.scopes ?? []).length > 0) {
      issues.push({ path: ["namespaces", i, "scopes"], message: `expected no scopes for auth "none" (scopes are checked against a credential)` })
    }
  })
  return issues
}

const Checked = Fields.pipe(Schema.filter(crossFieldIssues))

const Resolved = Schema.declare((u: unknown): u is PinboardConfig => typeof u === "object" && u !== null, {
  identifier: "PinboardConfig"
})

export const PinboardConfigSchema: Schema.Schema<PinboardConfig, typeof Fields.Encoded> = Schema.transform(
  Checked,
  Resolved,
  {
    strict: false,
    decode: (c: Fields): PinboardConfig => ({
      ...c,
      redis: { url: c.redis.url, cluster: c.redis.cluster, prefix: c.redis.prefix },
      metrics: { port: c.metrics.port, host: c.metrics.host },
      nack: { threshold: c.nack.threshold, windowMs: c.nack.windowMs ?? c.leaseMs },
      namespaces: c.namespaces
    }),
    encode: (c: PinboardConfig): Fields => {
      const { namespaces, redis, metrics, ...rest } = c
      return {
        ...rest,
        metrics: {
          ...(metrics.port === undefined ? {} : { port: metrics.port }),
          ...(metrics.host === undefined ? {} : { host: metrics.host })
        },
        redis: {
          prefix: redis.prefix,
          ...(redis.url === undefined ? {} : { url: redis.url }),
          ...(redis.cluster === undefined ? {} : { cluster: redis.cluster })
        },
        ...(namespaces === undefined ? {} : { namespaces })
      }
    }
  }
)

/** The shape of the JSON config file. */
export type PinboardConfigFile = typeof PinboardConfigSchema.Encoded
