// Where configuration comes from (docs/config.md): flags > environment > JSON file > defaults.
// Environment values are strings; they are turned into the file's JSON types and
// laid over the file's object, so one Schema validates both.
export type Path = ReadonlyArray<string>

export interface EnvVar {
  readonly name: string
  readonly path: Path
  readonly kind: "string" | "number" | "boolean" | "list"
  /** Replaces the schema's "expected …" where the environment spells a value its own way. */
  readonly expected?: string
  /** One line for `pinboard --help`. */
  readonly summary: string
}

export const ENV_VARS: ReadonlyArray<EnvVar> = [
  { name: "PINBOARD_PORT", path: ["port"], kind: "number", summary: "port of the data plane (and of the registry API, unless PINBOARD_REGISTRY_PORT)" },
  { name: "PINBOARD_HOST", path: ["host"], kind: "string", summary: "address to listen on" },
  {
    name: "PINBOARD_TRUSTED_PROXIES",
    path: ["trustedProxies"],
    kind: "list",
    expected: "expected a comma-separated list of IP addresses and CIDR ranges",
    summary: "peers whose X-Forwarded-For names the client (addresses and CIDR ranges)"
  },
  {
    name: "PINBOARD_PROXY_PROTOCOL",
    path: ["proxyProtocol"],
    kind: "boolean",
    expected: "expected 1, 0, true or false",
    summary: "every connection opens with a PROXY protocol v1 or v2 header (1 or 0)"
  },
  { name: "PINBOARD_TLS_CERT", path: ["tls", "cert"], kind: "string", summary: "PEM file of the listener's certificate (its chain after it); with PINBOARD_TLS_KEY: HTTPS" },
  { name: "PINBOARD_TLS_KEY", path: ["tls", "key"], kind: "string", summary: "PEM file of that certificate's key; both files are taken again on SIGHUP and when they change" },
  {
    name: "PINBOARD_KEEPALIVE_TIMEOUT_MS",
    path: ["server", "keepAliveTimeoutMs"],
    kind: "number",
    summary: "an idle client connection is closed after this; keep it above the balancer's idle timeout"
  },
  { name: "PINBOARD_HEADERS_TIMEOUT_MS", path: ["server", "headersTimeoutMs"], kind: "number", summary: "a request's headers must arrive whole within this" },
  {
    name: "PINBOARD_HTTP2",
    path: ["http2", "enabled"],
    kind: "boolean",
    expected: "expected 1, 0, true or false",
    summary: "with TLS, ALPN offers HTTP/2 beside HTTP/1.1 (1, the default, or 0)"
  },
  {
    name: "PINBOARD_H2C",
    path: ["http2", "h2c"],
    kind: "boolean",
    expected: "expected 1, 0, true or false",
    summary: "without TLS, a connection that opens with the HTTP/2 preface speaks HTTP/2 (1 or 0)"
  },
  { name: "PINBOARD_HTTP2_MAX_CONCURRENT_STREAMS", path: ["http2", "maxConcurrentStreams"], kind: "number", summary: "streams one HTTP/2 connection may have open at once" },
  { name: "PINBOARD_HTTP2_MAX_HEADER_LIST_SIZE", path: ["http2", "maxHeaderListSize"], kind: "number", summary: "bytes of one HTTP/2 request's header list (RFC 9113 6.5.2)" },
  {
    name: "PINBOARD_HTTP2_STREAM_RESET_BURST",
    path: ["http2", "streamResetBurst"],
    kind: "number",
    summary: "streams an HTTP/2 client may cancel before their answer, at once, before its connection is closed"
  },
  { name: "PINBOARD_HTTP2_STREAM_RESET_RATE", path: ["http2", "streamResetRate"], kind: "number", summary: "and per second after that burst" },
  {
    name: "PINBOARD_DRAIN_DELAY_MS",
    path: ["shutdown", "drainDelayMs"],
    kind: "number",
    summary: "after SIGTERM, requests are still served this long with /readyz 503, then the drain"
  },
  { name: "PINBOARD_TOKEN", path: ["token"], kind: "string", summary: "the deployment token, every role; with PINBOARD_CREDENTIALS_FILE optional, an operator credential" },
  {
    name: "PINBOARD_CREDENTIALS_FILE",
    path: ["credentials"],
    kind: "string",
    summary: "JSON file of operator and worker credentials by role; read again on SIGHUP and when it changes"
  },
  {
    name: "PINBOARD_ATTESTATION_KEYS",
    path: ["attestation", "keys"],
    kind: "list",
    expected: "expected a comma-separated list of PEM files",
    summary: "PEM Ed25519 private keys, comma list: the first signs attestations, all are published"
  },
  { name: "PINBOARD_REDIS_URL", path: ["redis", "url"], kind: "string", summary: "one Redis; unset: the embedded registry" },
  {
    name: "PINBOARD_REDIS_CLUSTER",
    path: ["redis", "cluster"],
    kind: "list",
    expected: "expected a comma-separated list of host:port",
    summary: "a Redis Cluster's seed nodes, host:port,host:port"
  },
  {
    name: "PINBOARD_REDIS_SENTINELS",
    path: ["redis", "sentinels"],
    kind: "list",
    expected: "expected a comma-separated list of host:port",
    summary: "Redis Sentinels, host:port,host:port; with PINBOARD_REDIS_SENTINEL_MASTER"
  },
  { name: "PINBOARD_REDIS_SENTINEL_MASTER", path: ["redis", "sentinelMaster"], kind: "string", summary: "the master's name the sentinels monitor" },
  { name: "PINBOARD_REDIS_PREFIX", path: ["redis", "prefix"], kind: "string", summary: "prefix of every Redis key" },
  { name: "PINBOARD_REDIS_USERNAME", path: ["redis", "username"], kind: "string", summary: "Redis ACL user (every node of every mode)" },
  { name: "PINBOARD_REDIS_PASSWORD", path: ["redis", "password"], kind: "string", summary: "Redis password of that user, or requirepass" },
  {
    name: "PINBOARD_REDIS_PASSWORD_FILE",
    path: ["redis", "passwordFile"],
    kind: "string",
    summary: "a file holding the Redis password (a mounted secret), read at start"
  },
  { name: "PINBOARD_REDIS_SENTINEL_USERNAME", path: ["redis", "sentinelUsername"], kind: "string", summary: "ACL user on the sentinels, where they have one" },
  { name: "PINBOARD_REDIS_SENTINEL_PASSWORD", path: ["redis", "sentinelPassword"], kind: "string", summary: "password on the sentinels, where they have one" },
  {
    name: "PINBOARD_REDIS_TLS",
    path: ["redis", "tls"],
    kind: "boolean",
    expected: "expected 1, 0, true or false",
    summary: "TLS to every Redis node and sentinel (1 or 0); a rediss:// URL turns it on too"
  },
  { name: "PINBOARD_REDIS_TLS_CA", path: ["redis", "tlsCa"], kind: "string", summary: "PEM file of the CA that signed Redis's certificates; unset: the system's CAs" },
  { name: "PINBOARD_REDIS_TLS_CERT", path: ["redis", "tlsCert"], kind: "string", summary: "PEM file of a client certificate, for mutual TLS" },
  { name: "PINBOARD_REDIS_TLS_KEY", path: ["redis", "tlsKey"], kind: "string", summary: "PEM file of that certificate's key" },
  { name: "PINBOARD_REDIS_TLS_SERVERNAME", path: ["redis", "tlsServername"], kind: "string", summary: "name to check Redis's certificate against (SNI); unset: the host's" },
  { name: "PINBOARD_BUCKETS", path: ["buckets"], kind: "number", summary: "buckets the ids of every namespace share (one set, not one per namespace)" },
  {
    name: "PINBOARD_REGISTRY_MAX_CLOCK_OFFSET_MS",
    path: ["registry", "maxClockOffsetMs"],
    kind: "number",
    summary: "how far the wall clock may be from the registry's (Redis TIME) before registry writes stop"
  },
  { name: "PINBOARD_REGISTRY_PORT", path: ["registry", "port"], kind: "number", summary: "the registry API's own listener, off the data port; unset: on the data port" },
  { name: "PINBOARD_REGISTRY_HOST", path: ["registry", "host"], kind: "string", summary: "address of the registry API's listener; unset: PINBOARD_HOST's" },
  { name: "PINBOARD_LEASE_MS", path: ["leaseMs"], kind: "number", summary: "a worker's lease, and the cold start" },
  {
    name: "PINBOARD_HOSTNAME_AWARE",
    path: ["hostnameAware"],
    kind: "boolean",
    expected: "expected 1, 0, true or false",
    summary: "hostname-aware mode (1 or 0)"
  },
  { name: "PINBOARD_METRICS_PORT", path: ["metrics", "port"], kind: "number", summary: "the metrics listener's port; unset: off" },
  { name: "PINBOARD_LOG_LEVEL", path: ["log", "level"], kind: "string", summary: "debug, info, warning or error" },
  {
    name: "PINBOARD_ACCESS_LOG",
    path: ["log", "access"],
    kind: "boolean",
    expected: "expected 1, 0, true or false",
    summary: "one JSON line per instance request (1 or 0)"
  },
  { name: "PINBOARD_OTLP_ENDPOINT", path: ["otlp", "endpoint"], kind: "string", summary: "OTLP/HTTP collector for traces; unset: no tracing" },
  {
    name: "PINBOARD_OTLP_SAMPLE_RATIO",
    path: ["otlp", "sampleRatio"],
    kind: "number",
    summary: "share of requests without a sampled or unsampled traceparent that are traced, 0 to 1"
  }
]

/** Options whose values are never echoed back, in messages or by `pinboard config`. */
export const SECRET_KEYS: ReadonlySet<PropertyKey> = new Set(["token", "secret", "password", "sentinelPassword"])

export type Env = Readonly<Record<string, string | undefined>>

/** A value laid over the file, from the environment or a flag, kept to name it in messages. */
export interface EnvSource {
  readonly envVar: EnvVar
  readonly raw: string
  /** The variable's name, or the flag's (`--port`) when the command line set it. */
  readonly name: string
}

/** The options the command line may set (docs/config.md "Command line"); each wins over its environment variable. */
export interface CommandLineFlags {
  readonly config?: string | undefined
  readonly port?: string | undefined
  readonly host?: string | undefined
  readonly redisUrl?: string | undefined
}

/** Each flag, named as typed, and the variable it overrides. */
export const FLAG_VARS: ReadonlyArray<{
  readonly key: Exclude<keyof CommandLineFlags, "config">
  readonly flag: string
  /** The value's name in `--help`. */
  readonly metavar: string
  readonly envVar: string
}> = [
  { key: "port", flag: "--port", metavar: "N", envVar: "PINBOARD_PORT" },
  { key: "host", flag: "--host", metavar: "ADDRESS", envVar: "PINBOARD_HOST" },
  { key: "redisUrl", flag: "--redis-url", metavar: "URL", envVar: "PINBOARD_REDIS_URL" }
]

export type ConfigFileArgument =
  | { readonly _tag: "None" }
  | { readonly _tag: "File"; readonly path: string; readonly from: "--config" | "PINBOARD_CONFIG" }

/** `--config FILE`, else `PINBOARD_CONFIG`: the command line wins. */
export const configFileArgument = (flags: CommandLineFlags, env: Env): ConfigFileArgument => {
  if (flags.config !== undefined) return { _tag: "File", path: flags.config, from: "--config" }
  const fromEnv = env["PINBOARD_CONFIG"]
  return fromEnv === undefined || fromEnv === "" ? { _tag: "None" } : { _tag: "File", path: fromEnv, from: "PINBOARD_CONFIG" }
}

/**
 * `PINBOARD_*` names that are not options: the config file's, and the one the worker library
 * and the demo worker read (an environment shared with workers may hold it).
 */
const OTHER_KNOWN_VARS = ["PINBOARD_CONFIG", "PINBOARD_URL"]

/** Every `PINBOARD_*` name Pinboard knows; any other set in its environment is a mistake (docs/config.md). */
export const KNOWN_VARS: ReadonlyArray<string> = [...ENV_VARS.map((envVar) => envVar.name), ...OTHER_KNOWN_VARS]

/** The `PINBOARD_*` variables set in `env` that Pinboard does not know, in name order. */
export const unknownVariables = (env: Env): ReadonlyArray<string> =>
  Object.keys(env)
    .filter((name) => name.startsWith("PINBOARD_") && !KNOWN_VARS.includes(name))
    .sort()

const NUMBER = /^-?\d+(?:\.\d+)?$/

/** The JSON value an environment string stands for; left a string when it is not one, so the Schema reports it. */
const fromEnvString = (kind: EnvVar["kind"], raw: string): unknown => {
  const s = raw.trim()
  switch (kind) {
    case "string":
      return raw
    case "number":
      return NUMBER.test(s) ? Number(s) : raw
    case "boolean":
      return s === "1" || s === "true" ? true : s === "0" || s === "false" ? false : raw
    case "list":
      return s.split(",").map((item) => item.trim())
  }
}

export const isPlainObject = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * The file's object with every set environment variable laid over it, then every flag
 * given. An empty variable counts as unset (`FOO=` is how shells and compose files
 * leave one out). A value is not laid into a file entry that is not an object, so
 * that the file's own mistake is still reported.
 */
export const overlayEnv = (
  file: Record<string, unknown>,
  env: Env,
  flags: CommandLineFlags = {}
): { readonly input: Record<string, unknown>; readonly sources: ReadonlyArray<EnvSource> } => {
  const input: Record<string, unknown> = structuredClone(file)
  const sources: Array<EnvSource> = []
  for (const envVar of ENV_VARS) {
    const flag = FLAG_VARS.find((f) => f.envVar === envVar.name && flags[f.key] !== undefined)
    const raw = flag === undefined ? env[envVar.name] : flags[flag.key]
    if (raw === undefined || (raw === "" && flag === undefined)) continue
    const parent = objectAt(input, envVar.path.slice(0, -1))
    const leaf = envVar.path[envVar.path.length - 1]
    if (parent === undefined || leaf === undefined) continue
    parent[leaf] = fromEnvString(envVar.kind, raw)
    sources.push({ envVar, raw, name: flag?.flag ?? envVar.name })
  }
  return { input, sources }
}

/** The object at a path, created where absent; undefined when something else is in the way. */
const objectAt = (root: Record<string, unknown>, path: Path): Record<string, unknown> | undefined => {
  let target = root
  for (const key of path) {
    const next = key in target ? target[key] : {}
    if (!isPlainObject(next)) return undefined
    target = target[key] = next
  }
  return target
}

/** The value at a path of plain JSON, if there is one. */
export const lookup = (value: unknown, path: ReadonlyArray<PropertyKey>): unknown => {
  let current = value
  for (const key of path) {
    if (typeof current !== "object" || current === null) return undefined
    current = (current as Record<PropertyKey, unknown>)[key]
  }
  return current
}
