// The whole configuration as one Schema (docs/config.md): the JSON file's shape on the
// encoded side (environment values are merged into it first), PinboardConfig on
// the decoded side, defaults filled in.
import { Effect, Option, Schema, SchemaGetter, SchemaTransformation } from "effect"
import { NamespaceRule, ProviderSetting } from "./Auth.js"
import { CredentialsSource } from "./Credentials.js"
import {
  AffinityKeyFromString, BalanceFactor, Buckets, DEFAULT_TAKEOVER, expectedShape, Flag, Http2Limit, LeaseMs, LogLevelSetting, NonEmptyString, objectOf, OtlpEndpoint, Port,
  NonNegativeMs, PositiveInt, PositiveMs, ProxyAddress, FilePath, RedisNodes, RedisPassword, RedisPrefix, RedisUrl, SampleRatio, Takeover, Token
} from "./Fields.js"

/** Absent from the file: `value()` (a fresh one each time). */
const withDefault = <S extends Schema.Top>(schema: S, value: () => S["Type"]) =>
  schema.pipe(Schema.withDecodingDefaultTypeKey(Effect.sync(value)))

/** Absent from the file, `undefined` in the config: the key is always there, to read or to override. */
const optionalOrUndefined = <S extends Schema.Top>(schema: S) =>
  Schema.optionalKey(schema).pipe(
    Schema.decodeTo(Schema.UndefinedOr(Schema.toType(schema)), {
      decode: SchemaGetter.transformOptional((value) => Option.some(Option.getOrUndefined(value))),
      encode: SchemaGetter.transformOptional(Option.flatMap(Option.fromUndefinedOr))
    })
  )

/** An optional object whose own fields all have defaults: absent, it is `{}` with those. */
const section = <S extends Schema.Top>(struct: S) =>
  objectOf(struct).pipe(Schema.withDecodingDefaultKey(Effect.succeed({})))

const ConfigFields = Schema.Struct({
  port: withDefault(Port, () => 8080),
  host: withDefault(NonEmptyString, () => "0.0.0.0"),
  /** Peers whose `X-Forwarded-For` names the client (docs/deploy.md "Behind a load balancer"). */
  trustedProxies: withDefault(Schema.Array(ProxyAddress).annotate(expectedShape("a list of IP addresses and CIDR ranges")), () => []),
  /** Every connection to `port` opens with a PROXY protocol header (v1 or v2). */
  proxyProtocol: withDefault(Flag, () => false),
  /** The data-plane listener speaks TLS with this certificate chain and key, both or neither (docs/deploy.md "TLS"). */
  tls: section(Schema.Struct({
    cert: optionalOrUndefined(FilePath),
    key: optionalOrUndefined(FilePath)
  })),
  /** The data-plane listener's connection timeouts; no total request timeout (docs/proxy.md "Limits"). */
  server: section(Schema.Struct({
    keepAliveTimeoutMs: withDefault(PositiveMs, () => 75_000),
    headersTimeoutMs: withDefault(PositiveMs, () => 60_000)
  })),
  /**
   * HTTP/2 on the data-plane listener (docs/deploy.md "HTTP/2"): offered by ALPN over TLS
   * (`enabled`), with prior knowledge on a plain listener (`h2c`); the limits of each connection.
   * An idle connection is closed after `server.keepAliveTimeoutMs`, as an HTTP/1.1 one.
   */
  http2: section(Schema.Struct({
    enabled: withDefault(Flag, () => true),
    h2c: withDefault(Flag, () => false),
    maxConcurrentStreams: withDefault(Http2Limit, () => 128),
    maxHeaderListSize: withDefault(Http2Limit, () => 16_384),
    streamResetBurst: withDefault(Http2Limit, () => 100),
    streamResetRate: withDefault(Http2Limit, () => 33)
  })),
  /** With `credentials`, optional: then an operator credential (docs/deploy.md "Credentials"). */
  token: optionalOrUndefined(Token),
  /** Undefined: the deployment token holds every role. A string names the file that holds the set. */
  credentials: optionalOrUndefined(CredentialsSource),
  /** PEM Ed25519 private keys: the first signs `Pinboard-Attestation`, all are published; none: HS256 from the token. */
  attestation: section(Schema.Struct({
    keys: withDefault(Schema.Array(FilePath).annotate(expectedShape("a list of PEM files")), () => [])
  })),
  /** One of url, cluster or sentinels (none: the embedded registry); the rest applies to every mode (docs/deploy.md). */
  redis: section(Schema.Struct({
    url: optionalOrUndefined(RedisUrl),
    cluster: optionalOrUndefined(RedisNodes),
    sentinels: optionalOrUndefined(RedisNodes),
    sentinelMaster: optionalOrUndefined(NonEmptyString),
    prefix: withDefault(RedisPrefix, () => "pb"),
    username: optionalOrUndefined(NonEmptyString),
    password: optionalOrUndefined(RedisPassword),
    passwordFile: optionalOrUndefined(FilePath),
    sentinelUsername: optionalOrUndefined(NonEmptyString),
    sentinelPassword: optionalOrUndefined(RedisPassword),
    tls: withDefault(Flag, () => false),
    tlsCa: optionalOrUndefined(FilePath),
    tlsCert: optionalOrUndefined(FilePath),
    tlsKey: optionalOrUndefined(FilePath),
    tlsServername: optionalOrUndefined(NonEmptyString)
  })),
  /**
   * `maxClockOffsetMs`: how far this process's wall clock may be from the registry's before it
   * stops writing (docs/deploy.md "Clocks"). `port`: the registry API's own listener, off the
   * data port; `host` defaults to `host`.
   */
  registry: section(Schema.Struct({
    maxClockOffsetMs: withDefault(PositiveMs, () => 1000),
    port: optionalOrUndefined(Port),
    host: optionalOrUndefined(NonEmptyString)
  })),
  buckets: withDefault(Buckets, () => 16),
  leaseMs: withDefault(LeaseMs, () => 15_000),
  balanceFactor: withDefault(BalanceFactor, () => 1.25),
  affinity: section(Schema.Struct({ key: withDefault(AffinityKeyFromString, () => ({ _tag: "ip" as const })) })),
  hostnameAware: withDefault(Flag, () => false),
  /** Envs not listed take over with `wind_down`; see `takeoverOf`. */
  envs: withDefault(
    Schema.Record(Schema.String, objectOf(Schema.Struct({ takeover: withDefault(Takeover, () => DEFAULT_TAKEOVER) }))).annotate(
      expectedShape("an object")
    ),
    () => ({})
  ),
  forwards: section(Schema.Struct({
    timeoutMs: withDefault(PositiveMs, () => 30_000),
    maxInflight: withDefault(PositiveInt, () => 1024)
  })),
  nack: section(Schema.Struct({
    threshold: withDefault(PositiveInt, () => 3),
    windowMs: Schema.optionalKey(PositiveMs) // default: one lease, filled in by PinboardConfigSchema
  })),
  /** `drainDelayMs`: how long requests are still served after SIGTERM, `/readyz` already 503; then `graceMs` for those in flight. */
  shutdown: section(Schema.Struct({
    drainDelayMs: withDefault(NonNegativeMs, () => 0),
    graceMs: withDefault(PositiveMs, () => 10_000)
  })),
  /** The Prometheus listener; off while `port` is undefined. `host` defaults to `host`. */
  metrics: section(Schema.Struct({
    port: optionalOrUndefined(Port),
    host: optionalOrUndefined(NonEmptyString)
  })),
  /** Lowest level written; `access`: one line per instance request. */
  log: section(Schema.Struct({
    level: withDefault(LogLevelSetting, () => "info" as const),
    access: withDefault(Flag, () => false)
  })),
  /**
   * Traces over OTLP/HTTP (docs/operations.md "Traces"); off while `endpoint` is undefined.
   * `sampleRatio`: the share of requests without a caller's decision that are traced.
   */
  otlp: section(Schema.Struct({
    endpoint: optionalOrUndefined(OtlpEndpoint),
    sampleRatio: withDefault(SampleRatio, () => 1)
  })),
  providers: withDefault(
    Schema.Record(Schema.String, ProviderSetting).annotate(expectedShape("an object")),
    () => ({})
  ),
  /** `undefined`: open, every namespace admitted without a credential. */
  namespaces: optionalOrUndefined(Schema.Array(NamespaceRule).annotate(expectedShape("a list of namespace rules")))
}).annotate(expectedShape("a JSON object"))

type ConfigFields = typeof ConfigFields.Type

/** Rules that span fields; each issue points at the field to fix. */
const crossFieldIssues = (c: ConfigFields): Array<Schema.FilterIssue> => {
  const issues: Array<Schema.FilterIssue> = [...redisIssues(c.redis), ...listenerIssues(c), ...tlsIssues(c.tls), ...h2cIssues(c), ...tokenIssues(c)]
  const providerNames = Object.keys(c.providers)
  const seen = new Set<string>()
  c.namespaces?.forEach((rule, i) => {
    if (seen.has(rule.namespace)) {
      issues.push({ path: ["namespaces", i, "namespace"], issue: "expected a namespace no earlier rule names" })
    }
    seen.add(rule.namespace)
    rule.providers?.forEach((name, j) => {
      if (!providerNames.includes(name)) {
        issues.push({ path: ["namespaces", i, "providers", j], issue: "expected the name of a provider in providers" })
      }
    })
    if (rule.auth !== "none" && (rule.providers ?? providerNames).length === 0) {
      issues.push({ path: ["namespaces", i, "providers"], issue: `expected at least one provider for auth "${rule.auth}"` })
    }
    // With no credential checked there is no principal to hold them: every request would be refused.
    if (rule.auth === "none" && (rule.scopes ?? []).length > 0) {
      issues.push({ path: ["namespaces", i, "scopes"], issue: `expected no scopes for auth "none" (scopes are checked against a credential)` })
    }
  })
  return issues
}

/** Without `credentials` the deployment token is every credential there is. */
const tokenIssues = (c: ConfigFields): Array<Schema.FilterIssue> =>
  c.token === undefined && c.credentials === undefined
    ? [{ path: ["token"], issue: 'required; set PINBOARD_TOKEN or "token" in the config file, or credentials (PINBOARD_CREDENTIALS_FILE)' }]
    : c.token === undefined && c.attestation.keys.length === 0
      ? [{ path: ["attestation", "keys"], issue: "expected attestation keys (PINBOARD_ATTESTATION_KEYS) without a deployment token: nothing else could sign attestations" }]
      : []

/** Each listener on its own port. */
const listenerIssues = (c: ConfigFields): Array<Schema.FilterIssue> => {
  const { port } = c.registry
  const taken = [
    { by: "the data plane's", port: c.port },
    { by: "the metrics listener's", port: c.metrics.port }
  ]
  return taken
    .filter((other) => port !== undefined && other.port === port)
    .map((other) => ({ path: ["registry", "port"], issue: `expected a port other than ${other.by} (${port})` }))
}

/** A certificate goes with its key. */
const tlsIssues = (t: ConfigFields["tls"]): Array<Schema.FilterIssue> =>
  (t.cert === undefined) === (t.key === undefined)
    ? []
    : [{ path: ["tls", t.cert === undefined ? "cert" : "key"], issue: "expected tls.cert (PINBOARD_TLS_CERT) and tls.key (PINBOARD_TLS_KEY) together" }]

/** h2c is HTTP/2 on a plain listener: over TLS, ALPN offers HTTP/2 (`http2.enabled`). */
const h2cIssues = (c: ConfigFields): Array<Schema.FilterIssue> =>
  c.http2.h2c && c.tls.cert !== undefined
    ? [{ path: ["tls", "cert"], issue: "expected no http2.h2c (PINBOARD_H2C) with it: over TLS, ALPN offers HTTP/2 (PINBOARD_HTTP2)" }]
    : []

/** The Redis section's rules: one mode, and no setting that its mode or TLS leaves unused. */
const redisIssues = (r: ConfigFields["redis"]): Array<Schema.FilterIssue> => {
  const issues: Array<Schema.FilterIssue> = []
  const issue = (field: string, message: string) => issues.push({ path: ["redis", field], issue: message })
  const modes = [r.url, r.cluster, r.sentinels].filter((mode) => mode !== undefined).length
  if (modes > 1) {
    issues.push({
      path: ["redis"],
      issue: "expected one of url (PINBOARD_REDIS_URL), cluster (PINBOARD_REDIS_CLUSTER) or sentinels (PINBOARD_REDIS_SENTINELS), not several"
    })
  }
  if (r.sentinels !== undefined && r.sentinelMaster === undefined) {
    issue("sentinelMaster", "expected the name the sentinels monitor (PINBOARD_REDIS_SENTINEL_MASTER) with sentinels")
  }
  if (r.sentinels === undefined) {
    for (const field of ["sentinelMaster", "sentinelUsername", "sentinelPassword"] as const) {
      if (r[field] !== undefined) issue(field, "expected sentinels (PINBOARD_REDIS_SENTINELS) to be set with it")
    }
  }
  if (r.password !== undefined && r.passwordFile !== undefined) {
    issue("passwordFile", "expected either password (PINBOARD_REDIS_PASSWORD) or passwordFile (PINBOARD_REDIS_PASSWORD_FILE), not both")
  }
  if ((r.tlsCert === undefined) !== (r.tlsKey === undefined)) {
    issue(r.tlsCert === undefined ? "tlsCert" : "tlsKey", "expected tlsCert (PINBOARD_REDIS_TLS_CERT) and tlsKey (PINBOARD_REDIS_TLS_KEY) together")
  }
  if (!r.tls && !(r.url?.startsWith("rediss:") ?? false)) {
    for (const field of ["tlsCa", "tlsCert", "tlsKey", "tlsServername"] as const) {
      if (r[field] !== undefined) issue(field, "expected tls (PINBOARD_REDIS_TLS=1) or a rediss:// url with it")
    }
  }
  return issues
}

const Checked = ConfigFields.check(Schema.makeFilter(crossFieldIssues))

// The decoded side: the fields' own types, with `nack.windowMs` always set.
const Resolved = Schema.toType(Schema.Struct({
  ...ConfigFields.fields,
  nack: Schema.Struct({ threshold: PositiveInt, windowMs: PositiveMs })
}))

export const PinboardConfigSchema = Checked.pipe(
  Schema.decodeTo(
    Resolved,
    SchemaTransformation.transform({
      // One default is another field's value, so it is filled in once every field has its own.
      decode: (c: ConfigFields): typeof Resolved.Type => ({ ...c, nack: { threshold: c.nack.threshold, windowMs: c.nack.windowMs ?? c.leaseMs } }),
      encode: (c: typeof Resolved.Type): ConfigFields => c
    })
  )
)

export type PinboardConfig = typeof PinboardConfigSchema.Type

/** The shape of the JSON config file. */
export type PinboardConfigFile = typeof PinboardConfigSchema.Encoded
