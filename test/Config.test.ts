// docs/config.md: flags > environment > JSON file > defaults; every invalid value is a
// ConfigInvalid whose message names the field (or variable, or flag) and what was expected.
import { createHash, generateKeyPairSync } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { ConfigInvalid, loadConfig, type PinboardConfig, takeoverOf } from "../src/Config.js"
import { readRedisFiles } from "../src/config/RedisFiles.js"
import { configForTests } from "./support/TestConfig.js"

const dir = mkdtempSync(join(tmpdir(), "pinboard-config-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

let files = 0
/** Writes a config file (an object as JSON, a string as is) and returns its path. */
const writeConfig = (content: unknown): string => {
  const path = join(dir, `config-${++files}.json`)
  writeFileSync(path, typeof content === "string" ? content : JSON.stringify(content))
  return path
}

type Env = Record<string, string>
const TOKEN: Env = { PINBOARD_TOKEN: "deployment-secret" }

const load = (env: Env, file?: unknown) =>
  loadConfig({ flags: file === undefined ? {} : { config: writeConfig(file) }, env })

const failure = (env: Env, file?: unknown) =>
  load(env, file).pipe(
    Effect.flip,
    Effect.tap((e) => Effect.sync(() => expect(e).toBeInstanceOf(ConfigInvalid))),
    Effect.map((e) => e.message)
  )

const plain = (config: PinboardConfig) => ({ ...config, token: config.token === undefined ? undefined : Redacted.value(config.token) })

const DEFAULTS = {
  port: 8080,
  host: "0.0.0.0",
  trustedProxies: [],
  proxyProtocol: false,
  tls: { cert: undefined, key: undefined },
  server: { keepAliveTimeoutMs: 75000, headersTimeoutMs: 60000 },
  http2: { enabled: true, h2c: false, maxConcurrentStreams: 128, maxHeaderListSize: 16384, streamResetBurst: 100, streamResetRate: 33 },
  token: "deployment-secret",
  credentials: undefined,
  attestation: { keys: [] },
  redis: { url: undefined, cluster: undefined, sentinels: undefined, sentinelMaster: undefined, prefix: "pb", username: undefined, password: undefined, passwordFile: undefined, sentinelUsername: undefined, sentinelPassword: undefined, tls: false, tlsCa: undefined, tlsCert: undefined, tlsKey: undefined, tlsServername: undefined },
  registry: { maxClockOffsetMs: 1000, port: undefined, host: undefined },
  buckets: 16,
  leaseMs: 15000,
  balanceFactor: 1.25,
  affinity: { key: { _tag: "ip" } },
  hostnameAware: false,
  envs: {},
  forwards: { timeoutMs: 30000, maxInflight: 1024 },
  nack: { threshold: 3, windowMs: 15000 },
  shutdown: { drainDelayMs: 0, graceMs: 10000 },
  metrics: { port: undefined, host: undefined },
  log: { level: "info", access: false },
  otlp: { endpoint: undefined, sampleRatio: 1 },
  providers: {},
  namespaces: undefined
}

const SHA = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"
const PEM = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ type: "spki", format: "pem" }).toString()

describe("defaults", () => {
  it.effect("every option has its docs/config.md default; only the token is needed", () =>
    Effect.gen(function*() {
      const config = yield* load(TOKEN)
      expect(plain(config)).toStrictEqual(DEFAULTS)
    }))

  it.effect("the token is Redacted: it shows in neither String nor JSON", () =>
    Effect.gen(function*() {
      const config = yield* load(TOKEN)
      expect(Redacted.isRedacted(config.token)).toBe(true)
      expect(String(config.token)).not.toContain("deployment-secret")
      expect(JSON.stringify(config)).not.toContain("deployment-secret")
    }))

  it("configForTests: defaults with token test-token, shallow overrides, nack window following the lease", () => {
    const config = configForTests()
    expect(plain(config)).toStrictEqual({ ...DEFAULTS, token: "test-token" })
    const shorter = configForTests({ leaseMs: 2000, port: 9 })
    expect(shorter.port).toBe(9)
    expect(shorter.nack).toStrictEqual({ threshold: 3, windowMs: 2000 })
    expect(configForTests({ leaseMs: 2000, nack: { threshold: 1, windowMs: 50 } }).nack.windowMs).toBe(50)
  })
})

describe("precedence: environment > file > defaults", () => {
  it.effect("file values replace defaults; untouched options keep theirs", () =>
    Effect.gen(function*() {
      const config = yield* load(TOKEN, {
        port: 9000,
        redis: { prefix: "file" },
        leaseMs: 4000,
        forwards: { timeoutMs: 500 },
        balanceFactor: 2
      })
      expect(config.port).toBe(9000)
      expect(config.redis).toStrictEqual({ url: undefined, cluster: undefined, sentinels: undefined, sentinelMaster: undefined, prefix: "file", username: undefined, password: undefined, passwordFile: undefined, sentinelUsername: undefined, sentinelPassword: undefined, tls: false, tlsCa: undefined, tlsCert: undefined, tlsKey: undefined, tlsServername: undefined })
      expect(config.leaseMs).toBe(4000)
      expect(config.forwards).toStrictEqual({ timeoutMs: 500, maxInflight: 1024 })
      expect(config.balanceFactor).toBe(2)
      expect(config.host).toBe("0.0.0.0")
      expect(config.nack).toStrictEqual({ threshold: 3, windowMs: 4000 }) // one (effective) lease
    }))

  it.effect("environment values replace file values", () =>
    Effect.gen(function*() {
      const config = yield* load(
        {
          PINBOARD_TOKEN: "from-env",
          PINBOARD_PORT: "9100",
          PINBOARD_HOST: "127.0.0.1",
          PINBOARD_REDIS_PREFIX: "env",
          PINBOARD_BUCKETS: "64",
          PINBOARD_LEASE_MS: "6000",
          PINBOARD_HOSTNAME_AWARE: "1"
        },
        {
          token: "from-file",
          port: 9000,
          host: "10.0.0.1",
          redis: { prefix: "file" },
          buckets: 32,
          leaseMs: 4000,
          hostnameAware: false
        }
      )
      expect(Redacted.value(config.token!)).toBe("from-env")
      expect(config.port).toBe(9100)
      expect(config.host).toBe("127.0.0.1")
      expect(config.redis.prefix).toBe("env")
      expect(config.buckets).toBe(64)
      expect(config.leaseMs).toBe(6000)
      expect(config.hostnameAware).toBe(true)
      expect(config.nack.windowMs).toBe(6000) // the lease in effect, from the environment
    }))

  it.effect("metrics and log options, from the file and the environment", () =>
    Effect.gen(function*() {
      const fromFile = yield* load({ ...TOKEN }, { metrics: { port: 9464, host: "127.0.0.1" }, log: { level: "warning", access: true } })
      expect(fromFile.metrics).toStrictEqual({ port: 9464, host: "127.0.0.1" })
      expect(fromFile.log).toStrictEqual({ level: "warning", access: true })
      const fromEnv = yield* load(
        { ...TOKEN, PINBOARD_METRICS_PORT: "9100", PINBOARD_LOG_LEVEL: "debug", PINBOARD_ACCESS_LOG: "1" },
        { metrics: { port: 9464 }, log: { level: "error", access: false } }
      )
      expect(fromEnv.metrics).toStrictEqual({ port: 9100, host: undefined })
      expect(fromEnv.log).toStrictEqual({ level: "debug", access: true })
    }))

  it.effect("the OTLP endpoint (docs/operations.md \"Traces\"), from the file and the environment", () =>
    Effect.gen(function*() {
      const fromFile = yield* load({ ...TOKEN }, { otlp: { endpoint: "https://collector.example:4318" } })
      expect(fromFile.otlp).toStrictEqual({ endpoint: "https://collector.example:4318", sampleRatio: 1 })
      const fromEnv = yield* load({ ...TOKEN, PINBOARD_OTLP_ENDPOINT: "http://127.0.0.1:4318/" }, { otlp: { endpoint: "https://collector.example:4318", sampleRatio: 0.25 } })
      expect(fromEnv.otlp).toStrictEqual({ endpoint: "http://127.0.0.1:4318/", sampleRatio: 0.25 })
      const ratioFromEnv = yield* load({ ...TOKEN, PINBOARD_OTLP_SAMPLE_RATIO: "0.01" }, { otlp: { sampleRatio: 0.5 } })
      expect(ratioFromEnv.otlp).toStrictEqual({ endpoint: undefined, sampleRatio: 0.01 })
    }))

  it.effect("an explicit nack.windowMs is kept whatever the lease", () =>
    Effect.gen(function*() {
      const config = yield* load({ ...TOKEN, PINBOARD_LEASE_MS: "6000" }, { nack: { threshold: 5, windowMs: 1234 } })
      expect(config.nack).toStrictEqual({ threshold: 5, windowMs: 1234 })
    }))

  it.effect("the token may come from the file alone", () =>
    Effect.gen(function*() {
      const config = yield* load({}, { token: "from-file" })
      expect(Redacted.value(config.token!)).toBe("from-file")
    }))

  it.effect("an empty environment variable counts as unset", () =>
    Effect.gen(function*() {
      const config = yield* load({ ...TOKEN, PINBOARD_PORT: "", PINBOARD_REDIS_URL: "" }, { port: 9000 })
      expect(config.port).toBe(9000)
      expect(config.redis.url).toBeUndefined()
    }))

  it.effect("PINBOARD_HOSTNAME_AWARE accepts 1, 0, true and false", () =>
    Effect.gen(function*() {
      for (const [raw, value] of [["1", true], ["true", true], ["0", false], ["false", false]] as const) {
        const config = yield* load({ ...TOKEN, PINBOARD_HOSTNAME_AWARE: raw }, { hostnameAware: !value })
        expect(config.hostnameAware).toBe(value)
      }
    }))

  it.effect("PINBOARD_REDIS_URL and PINBOARD_REDIS_CLUSTER", () =>
    Effect.gen(function*() {
      const single = yield* load({ ...TOKEN, PINBOARD_REDIS_URL: "rediss://:pw@cache:6380/2" })
      expect(single.redis.url).toBe("rediss://:pw@cache:6380/2")
      const cluster = yield* load(
        { ...TOKEN, PINBOARD_REDIS_CLUSTER: "10.0.0.1:7000, redis-b:7001,[::1]:7002" },
        { redis: { cluster: ["ignored:1"] } }
      )
      expect(cluster.redis.cluster).toStrictEqual(["10.0.0.1:7000", "redis-b:7001", "[::1]:7002"])
      expect(cluster.redis.url).toBeUndefined()
    }))

  it.effect("the file is found by --config or PINBOARD_CONFIG; the command line wins", () =>
    Effect.gen(function*() {
      const a = writeConfig({ port: 1111 })
      const b = writeConfig({ port: 2222 })
      expect((yield* loadConfig({ flags: {}, env: { ...TOKEN, PINBOARD_CONFIG: a } })).port).toBe(1111)
      expect((yield* loadConfig({ flags: { config: b }, env: TOKEN })).port).toBe(2222)
      expect((yield* loadConfig({ flags: { config: b }, env: { ...TOKEN, PINBOARD_CONFIG: a } })).port).toBe(2222)
    }))

  it.effect("--port, --host and --redis-url win over their variables and the file; a bad flag value is named by its flag", () =>
    Effect.gen(function*() {
      const file = writeConfig({ port: 1111, host: "10.0.0.1" })
      const env = { ...TOKEN, PINBOARD_PORT: "2222", PINBOARD_REDIS_URL: "redis://env:6379" }
      const config = yield* loadConfig({ flags: { config: file, port: "3333", host: "127.0.0.1", redisUrl: "redis://flag:6380" }, env })
      expect([config.port, config.host, config.redis.url]).toStrictEqual([3333, "127.0.0.1", "redis://flag:6380"])
      const message = yield* loadConfig({ flags: { port: "http" }, env }).pipe(Effect.flip, Effect.map((e) => e.message))
      expect(message).toBe(`--port: expected an integer from 1 to 65535, got "http"`)
      const both = yield* loadConfig({ flags: { redisUrl: "redis://a:1" }, env: { ...TOKEN, PINBOARD_REDIS_CLUSTER: "b:2" } }).pipe(
        Effect.flip,
        Effect.map((e) => e.message)
      )
      expect(both).toBe("redis: expected one of url (PINBOARD_REDIS_URL), cluster (PINBOARD_REDIS_CLUSTER) or sentinels (PINBOARD_REDIS_SENTINELS), not several")
    }))
})

describe("structured options", () => {
  it.effect("affinity.key: ip, header:<name> (lowercased), cookie:<name>", () =>
    Effect.gen(function*() {
      expect((yield* load(TOKEN, { affinity: { key: "ip" } })).affinity.key).toStrictEqual({ _tag: "ip" })
      expect((yield* load(TOKEN, { affinity: { key: "header:X-User-Id" } })).affinity.key).toStrictEqual({
        _tag: "header",
        name: "x-user-id"
      })
      expect((yield* load(TOKEN, { affinity: { key: "cookie:Session" } })).affinity.key).toStrictEqual({
        _tag: "cookie",
        name: "Session"
      })
    }))

  it.effect("envs.<env>.takeover defaults to wind_down, for listed and unlisted envs", () =>
    Effect.gen(function*() {
      const config = yield* load(TOKEN, { envs: { prod: { takeover: "deny" }, staging: {} } })
      expect(config.envs).toStrictEqual({ prod: { takeover: "deny" }, staging: { takeover: "wind_down" } })
      expect(takeoverOf(config)("prod")).toBe("deny")
      expect(takeoverOf(config)("staging")).toBe("wind_down")
      expect(takeoverOf(config)("preview")).toBe("wind_down")
    }))

  it.effect("providers and namespaces of docs/config.md 'Data-plane auth'", () =>
    Effect.gen(function*() {
      const config = yield* load(TOKEN, {
        providers: {
          users: {
            type: "jwt",
            jwksUrl: "https://id.example.com/jwks.json",
            issuer: "https://id.example.com/",
            audience: "pinboard"
          },
          svc: { type: "jwt", secret: "hmac-secret", audience: ["a", "b"], algorithms: ["HS256", "HS512"] },
          pem: { type: "jwt", publicKey: PEM, algorithms: ["ES256"] },
          keys: { type: "apikey", keys: [{ sha256: SHA, subject: "ci", scopes: ["threads"] }] }
        },
        namespaces: [
          { namespace: "/threads", auth: "required", providers: ["users", "keys"], scopes: ["threads"], callers: ["/rooms"] },
          { namespace: "/public", auth: "none" },
          { namespace: "/api", auth: "optional", providers: ["svc"], credential: { header: "X-Api-Key" } },
          { namespace: "*", auth: "required", providers: ["users"], credential: { cookie: "session" } }
        ]
      })
      expect(Object.keys(config.providers)).toStrictEqual(["users", "svc", "pem", "keys"])
      const svc = config.providers["svc"]
      expect(svc?.type === "jwt" && svc.secret !== undefined && Redacted.value(svc.secret)).toBe("hmac-secret")
      expect(JSON.stringify(config.providers)).not.toContain("hmac-secret")
      expect(config.providers["keys"]).toStrictEqual({
        type: "apikey",
        keys: [{ sha256: SHA.toLowerCase(), subject: "ci", scopes: ["threads"] }]
      })
      expect(config.providers["pem"]).toStrictEqual({ type: "jwt", publicKey: PEM, algorithms: ["ES256"] })
      expect(config.namespaces?.map((r) => r.namespace)).toStrictEqual(["/threads", "/public", "/api", "*"])
      expect(config.namespaces?.[2]?.credential).toStrictEqual({ header: "x-api-key" })
      expect(config.namespaces?.[3]?.credential).toStrictEqual({ cookie: "session" })
    }))
})

describe("invalid values: ConfigInvalid naming the field and what was expected", () => {
  const cases: ReadonlyArray<{ readonly name: string; readonly env?: Env; readonly file?: unknown; readonly raw?: string; readonly message: string }> = [
    { name: "missing token", env: { PINBOARD_TOKEN: "" }, message: `token: required; set PINBOARD_TOKEN or "token" in the config file, or credentials (PINBOARD_CREDENTIALS_FILE)` },
    { name: "empty token in the file", env: { PINBOARD_TOKEN: "" }, file: { token: "" }, message: "token: expected a non-empty string" },
    { name: "port not a number", env: { PINBOARD_PORT: "abc" }, message: `PINBOARD_PORT: expected an integer from 1 to 65535, got "abc"` },
    { name: "port out of range", env: { PINBOARD_PORT: "70000" }, message: `PINBOARD_PORT: expected an integer from 1 to 65535, got "70000"` },
    { name: "port 0 in the file", file: { port: 0 }, message: "port: expected an integer from 1 to 65535, got 0" },
    { name: "port a string in the file", file: { port: "8080" }, message: `port: expected an integer from 1 to 65535, got "8080"` },
    { name: "non-integer lease", env: { PINBOARD_LEASE_MS: "1500.5" }, message: `PINBOARD_LEASE_MS: expected an integer from 1000 to 2147483647, got "1500.5"` },
    { name: "lease below 1000", file: { leaseMs: 999 }, message: "leaseMs: expected an integer from 1000 to 2147483647, got 999" },
    { name: "NaN lease", env: { PINBOARD_LEASE_MS: "NaN" }, message: `PINBOARD_LEASE_MS: expected an integer from 1000 to 2147483647, got "NaN"` },
    { name: "negative buckets", env: { PINBOARD_BUCKETS: "-3" }, message: `PINBOARD_BUCKETS: expected an integer from 1 to 16384, got "-3"` },
    { name: "too many buckets", file: { buckets: 16385 }, message: "buckets: expected an integer from 1 to 16384, got 16385" },
    { name: "negative timeout", file: { forwards: { timeoutMs: -5 } }, message: "forwards.timeoutMs: expected a positive integer of milliseconds (at most 2147483647), got -5" },
    { name: "fractional maxInflight", file: { forwards: { maxInflight: 1.5 } }, message: "forwards.maxInflight: expected a positive integer, got 1.5" },
    { name: "zero grace", file: { shutdown: { graceMs: 0 } }, message: "shutdown.graceMs: expected a positive integer of milliseconds (at most 2147483647), got 0" },
    { name: "zero nack threshold", file: { nack: { threshold: 0 } }, message: "nack.threshold: expected a positive integer, got 0" },
    { name: "balanceFactor below 1", file: { balanceFactor: 0.5 }, message: "balanceFactor: expected a finite number >= 1, got 0.5" },
    { name: "infinite balanceFactor", raw: `{"balanceFactor":1e400}`, message: "balanceFactor: expected a finite number >= 1, got Infinity" },
    { name: "hostnameAware not a flag", env: { PINBOARD_HOSTNAME_AWARE: "yes" }, message: `PINBOARD_HOSTNAME_AWARE: expected 1, 0, true or false, got "yes"` },
    { name: "hostnameAware a string in the file", file: { hostnameAware: "1" }, message: `hostnameAware: expected true or false, got "1"` },
    { name: "redis URL of another scheme", env: { PINBOARD_REDIS_URL: "http://cache:6379" }, message: `PINBOARD_REDIS_URL: expected a redis:// or rediss:// URL, got "http://cache:6379"` },
    { name: "redis URL not a URL", file: { redis: { url: "cache:6379" } }, message: `redis.url: expected a redis:// or rediss:// URL, got "cache:6379"` },
    { name: "cluster entry without a port", env: { PINBOARD_REDIS_CLUSTER: "a:7000,b" }, message: `PINBOARD_REDIS_CLUSTER: expected a comma-separated list of host:port, got "a:7000,b"` },
    { name: "cluster port out of range", file: { redis: { cluster: ["a:70000"] } }, message: `redis.cluster[0]: expected host:port, got "a:70000"` },
    { name: "empty cluster list", file: { redis: { cluster: [] } }, message: "redis.cluster: expected a non-empty list of host:port" },
    { name: "metrics port out of range", env: { PINBOARD_METRICS_PORT: "0" }, message: `PINBOARD_METRICS_PORT: expected an integer from 1 to 65535, got "0"` },
    { name: "empty metrics host", file: { metrics: { host: "" } }, message: `metrics.host: expected a non-empty string, got ""` },
    { name: "unknown log level", env: { PINBOARD_LOG_LEVEL: "verbose" }, message: `PINBOARD_LOG_LEVEL: expected one of debug, info, warning, error, got "verbose"` },
    { name: "access log not a flag", env: { PINBOARD_ACCESS_LOG: "on" }, message: `PINBOARD_ACCESS_LOG: expected 1, 0, true or false, got "on"` },
    { name: "OTLP endpoint of another scheme", env: { PINBOARD_OTLP_ENDPOINT: "grpc://collector:4317" }, message: `PINBOARD_OTLP_ENDPOINT: expected an http:// or https:// URL, got "grpc://collector:4317"` },
    { name: "OTLP endpoint not a URL", file: { otlp: { endpoint: "collector:4318" } }, message: `otlp.endpoint: expected an http:// or https:// URL, got "collector:4318"` },
    { name: "sample ratio above 1", env: { PINBOARD_OTLP_SAMPLE_RATIO: "10" }, message: `PINBOARD_OTLP_SAMPLE_RATIO: expected a number from 0 to 1, got "10"` },
    { name: "sample ratio not a number", file: { otlp: { sampleRatio: "half" } }, message: `otlp.sampleRatio: expected a number from 0 to 1, got "half"` },
    { name: "prefix with a brace", env: { PINBOARD_REDIS_PREFIX: "pb}" }, message: `PINBOARD_REDIS_PREFIX: expected a non-empty string without { or }, got "pb}"` },
    {
      name: "url and cluster together (environment and file)",
      env: { PINBOARD_REDIS_URL: "redis://cache:6379" },
      file: { redis: { cluster: ["a:7000"] } },
      message: "redis: expected one of url (PINBOARD_REDIS_URL), cluster (PINBOARD_REDIS_CLUSTER) or sentinels (PINBOARD_REDIS_SENTINELS), not several"
    },
    { name: "sentinels without the master's name", env: { PINBOARD_REDIS_SENTINELS: "s1:26379,s2:26379" }, message: "redis.sentinelMaster: expected the name the sentinels monitor (PINBOARD_REDIS_SENTINEL_MASTER) with sentinels" },
    { name: "a master's name without sentinels", env: { PINBOARD_REDIS_SENTINEL_MASTER: "mymaster" }, message: `PINBOARD_REDIS_SENTINEL_MASTER: expected sentinels (PINBOARD_REDIS_SENTINELS) to be set with it, got "mymaster"` },
    { name: "a sentinel password without sentinels", env: { PINBOARD_REDIS_URL: "redis://cache:6379", PINBOARD_REDIS_SENTINEL_PASSWORD: "s3cret" }, message: "PINBOARD_REDIS_SENTINEL_PASSWORD: expected sentinels (PINBOARD_REDIS_SENTINELS) to be set with it" },
    { name: "sentinel entry without a port", env: { PINBOARD_REDIS_SENTINELS: "s1", PINBOARD_REDIS_SENTINEL_MASTER: "m" }, message: `PINBOARD_REDIS_SENTINELS: expected a comma-separated list of host:port, got "s1"` },
    { name: "url and sentinels together", env: { PINBOARD_REDIS_URL: "redis://cache:6379", PINBOARD_REDIS_SENTINELS: "s1:26379", PINBOARD_REDIS_SENTINEL_MASTER: "m" }, message: "redis: expected one of url (PINBOARD_REDIS_URL), cluster (PINBOARD_REDIS_CLUSTER) or sentinels (PINBOARD_REDIS_SENTINELS), not several" },
    { name: "password and password file together", env: { PINBOARD_REDIS_PASSWORD: "s3cret", PINBOARD_REDIS_PASSWORD_FILE: "/run/secrets/redis" }, message: `PINBOARD_REDIS_PASSWORD_FILE: expected either password (PINBOARD_REDIS_PASSWORD) or passwordFile (PINBOARD_REDIS_PASSWORD_FILE), not both, got "/run/secrets/redis"` },
    { name: "empty password", file: { redis: { password: "" } }, message: "redis.password: expected a non-empty string" },
    { name: "client certificate without its key", env: { PINBOARD_REDIS_TLS: "1", PINBOARD_REDIS_TLS_CERT: "/etc/pinboard/client.crt" }, message: "redis.tlsKey: expected tlsCert (PINBOARD_REDIS_TLS_CERT) and tlsKey (PINBOARD_REDIS_TLS_KEY) together" },
    { name: "a CA without TLS on", env: { PINBOARD_REDIS_URL: "redis://cache:6379", PINBOARD_REDIS_TLS_CA: "/etc/pinboard/ca.crt" }, message: `PINBOARD_REDIS_TLS_CA: expected tls (PINBOARD_REDIS_TLS=1) or a rediss:// url with it, got "/etc/pinboard/ca.crt"` },
    { name: "TLS not a flag", env: { PINBOARD_REDIS_TLS: "yes" }, message: `PINBOARD_REDIS_TLS: expected 1, 0, true or false, got "yes"` },
    { name: "bad affinity kind", file: { affinity: { key: "query:x" } }, message: `affinity.key: expected ip, header:<name> or cookie:<name>, got "query:x"` },
    { name: "affinity header without a name", file: { affinity: { key: "header:" } }, message: `affinity.key: expected ip, header:<name> or cookie:<name>, got "header:"` },
    { name: "bad takeover", file: { envs: { prod: { takeover: "kill" } } }, message: `envs.prod.takeover: expected "wind_down" or "deny", got "kill"` },
    { name: "env entry not an object", file: { envs: { prod: "deny" } }, message: `envs.prod: expected an object, got "deny"` },
    { name: "section not an object", file: { forwards: null }, message: "forwards: expected an object, got null" },
    { name: "jwt without a key", file: { providers: { a: { type: "jwt", issuer: "x" } } }, message: "providers.a: expected exactly one of jwksUrl, publicKey or secret" },
    {
      name: "jwt with two keys",
      file: { providers: { a: { type: "jwt", secret: "s", jwksUrl: "https://id/jwks.json" } } },
      message: "providers.a: expected exactly one of jwksUrl, publicKey or secret"
    },
    { name: "jwt public key not a PEM", file: { providers: { a: { type: "jwt", publicKey: "ssh-rsa AAAA" } } }, message: `providers.a.publicKey: expected a PEM (SPKI) public key, got "ssh-rsa AAAA"` },
    { name: "jwks URL not http(s)", file: { providers: { a: { type: "jwt", jwksUrl: "file:///jwks" } } }, message: `providers.a.jwksUrl: expected an http: or https: URL, got "file:///jwks"` },
    { name: "jwt audience a number", file: { providers: { a: { type: "jwt", secret: "s", audience: 5 } } }, message: "providers.a.audience: expected a non-empty string or a non-empty list of them, got 5" },
    { name: "unknown algorithm", file: { providers: { a: { type: "jwt", jwksUrl: "https://id/j", algorithms: ["none"] } } }, message: `providers.a.algorithms[0]: expected a JWS algorithm (HS256, HS384, HS512, RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, Ed25519), got "none"` },
    { name: "secret with an RSA algorithm", file: { providers: { a: { type: "jwt", secret: "s", algorithms: ["RS256"] } } }, message: "providers.a.algorithms: expected only HS256, HS384 or HS512 with secret" },
    { name: "secret never echoed", file: { providers: { a: { type: "jwt", secret: 12345 } } }, message: "providers.a.secret: expected a non-empty string" },
    { name: "provider of unknown type", file: { providers: { a: { type: "oauth" } } }, message: `providers.a.type: expected "jwt" | "apikey", got "oauth"` },
    { name: "provider without a type", file: { providers: { a: { secret: "s" } } }, message: "providers.a.type: required" },
    { name: "provider not an object", file: { providers: { a: 5 } }, message: `providers.a: expected an object with "type": "jwt" or "apikey", got 5` },
    { name: "apikey sha256 not 64 hex digits", file: { providers: { k: { type: "apikey", keys: [{ sha256: "abc", subject: "ci" }] } } }, message: `providers.k.keys[0].sha256: expected 64 hex digits (a SHA-256), got "abc"` },
    { name: "apikey without a subject", file: { providers: { k: { type: "apikey", keys: [{ sha256: SHA }] } } }, message: "providers.k.keys[0].subject: required" },
    { name: "apikey plain key", file: { providers: { k: { type: "apikey", keys: [{ key: "plain", sha256: SHA, subject: "ci" }] } } }, message: "providers.k.keys[0].key: unknown option (expected one of: sha256, subject, scopes)" },
    {
      name: "rule referencing an unknown provider",
      file: { providers: { users: { type: "jwt", secret: "s" } }, namespaces: [{ namespace: "/t", auth: "required", providers: ["users", "usres"] }] },
      message: `namespaces[0].providers[1]: expected the name of a provider in providers, got "usres"`
    },
    { name: "auth required and no provider at all", file: { namespaces: [{ namespace: "/t", auth: "required" }] }, message: `namespaces[0].providers: expected at least one provider for auth "required"` },
    { name: "bad auth", file: { namespaces: [{ namespace: "/t", auth: "maybe" }] }, message: `namespaces[0].auth: expected "none", "optional" or "required", got "maybe"` },
    { name: "namespace without its slash", file: { namespaces: [{ namespace: "threads", auth: "none" }] }, message: `namespaces[0].namespace: expected "*" or a namespace like "/threads", got "threads"` },
    { name: "scopes where no credential is checked", file: { namespaces: [{ namespace: "/t", auth: "none", scopes: ["read"] }] }, message: `namespaces[0].scopes: expected no scopes for auth "none" (scopes are checked against a credential)` },
    { name: "bad caller", file: { namespaces: [{ namespace: "/t", auth: "none", callers: ["rooms"] }] }, message: `namespaces[0].callers[0]: expected "*" or a namespace like "/threads", got "rooms"` },
    { name: "two rules for one namespace", file: { namespaces: [{ namespace: "/t", auth: "none" }, { namespace: "/t", auth: "none" }] }, message: `namespaces[1].namespace: expected a namespace no earlier rule names, got "/t"` },
    { name: "credential naming header and cookie", file: { namespaces: [{ namespace: "/t", auth: "none", credential: { header: "x", cookie: "y" } }] }, message: `namespaces[0].credential: expected {"header": <name>} or {"cookie": <name>}` },
    { name: "unknown top-level key", file: { leaseMS: 2000 }, message: "leaseMS: unknown option; did you mean leaseMs? (expected one of: port, host, trustedProxies, proxyProtocol, tls, server, http2, token, credentials, attestation, redis, registry, buckets, leaseMs, balanceFactor, affinity, hostnameAware, envs, forwards, nack, shutdown, metrics, log, otlp, providers, namespaces)" },
    { name: "a trusted proxy that is no address", env: { PINBOARD_TRUSTED_PROXIES: "10.0.0.0/8, lb.internal" }, message: `PINBOARD_TRUSTED_PROXIES: expected a comma-separated list of IP addresses and CIDR ranges, got "10.0.0.0/8, lb.internal"` },
    { name: "a CIDR prefix past the family's", file: { trustedProxies: ["10.0.0.0/33"] }, message: `trustedProxies[0]: expected an IP address or a CIDR range (10.0.0.0/8, fd00::/8), got "10.0.0.0/33"` },
    { name: "trusted proxies not a list in the file", file: { trustedProxies: "10.0.0.1" }, message: `trustedProxies: expected a list of IP addresses and CIDR ranges, got "10.0.0.1"` },
    { name: "PROXY protocol not a flag", env: { PINBOARD_PROXY_PROTOCOL: "yes" }, message: `PINBOARD_PROXY_PROTOCOL: expected 1, 0, true or false, got "yes"` },
    { name: "a keep-alive timeout of 0", env: { PINBOARD_KEEPALIVE_TIMEOUT_MS: "0" }, message: `PINBOARD_KEEPALIVE_TIMEOUT_MS: expected a positive integer of milliseconds (at most 2147483647), got "0"` },
    { name: "h2c with TLS", env: { PINBOARD_H2C: "1", PINBOARD_TLS_CERT: "/etc/pinboard/tls.crt", PINBOARD_TLS_KEY: "/etc/pinboard/tls.key" }, message: `PINBOARD_TLS_CERT: expected no http2.h2c (PINBOARD_H2C) with it: over TLS, ALPN offers HTTP/2 (PINBOARD_HTTP2), got "/etc/pinboard/tls.crt"` },
    { name: "no concurrent HTTP/2 stream", env: { PINBOARD_HTTP2_MAX_CONCURRENT_STREAMS: "0" }, message: `PINBOARD_HTTP2_MAX_CONCURRENT_STREAMS: expected a positive integer (at most 2147483647), got "0"` },
    { name: "a header list size past 31 bits", file: { http2: { maxHeaderListSize: 2 ** 31 } }, message: "http2.maxHeaderListSize: expected a positive integer (at most 2147483647), got 2147483648" },
    { name: "a negative drain delay", env: { PINBOARD_DRAIN_DELAY_MS: "-1" }, message: `PINBOARD_DRAIN_DELAY_MS: expected an integer of milliseconds from 0 to 2147483647, got "-1"` },
    { name: "the registry API on the data port", env: { PINBOARD_PORT: "9000", PINBOARD_REGISTRY_PORT: "9000" }, message: `PINBOARD_REGISTRY_PORT: expected a port other than the data plane's (9000), got "9000"` },
    { name: "the registry API on the metrics port", file: { metrics: { port: 9100 }, registry: { port: 9100 } }, message: "registry.port: expected a port other than the metrics listener's (9100), got 9100" },
    { name: "a mistyped variable", env: { PINBOARD_REDIS_CLUSTR: "r1:6379" }, message: "PINBOARD_REDIS_CLUSTR: unknown variable; did you mean PINBOARD_REDIS_CLUSTER?" },
    { name: "a variable like none", env: { PINBOARD_FROBNICATE: "1" }, message: "PINBOARD_FROBNICATE: unknown variable; pinboard --help lists every one" },
    { name: "a mistyped key in the file", file: { redis: { clustr: ["r1:6379"] } }, message: expect.stringMatching(/^redis\.clustr: unknown option; did you mean redis\.cluster\? \(expected one of: url, cluster, /) as unknown as string },
    { name: "unknown nested key", file: { forwards: { timeout: 5 } }, message: "forwards.timeout: unknown option; did you mean forwards.timeoutMs? (expected one of: timeoutMs, maxInflight)" },
    { name: "unknown provider key", file: { providers: { a: { type: "jwt", secret: "s", issuer: "i", audiences: ["x"] } } }, message: "providers.a.audiences: unknown option; did you mean providers.a.audience? (expected one of: type, jwksUrl, publicKey, secret, issuer, audience, algorithms)" },
  ]

  for (const c of cases) {
    it.effect(c.name, () =>
      Effect.gen(function*() {
        const env = { ...TOKEN, ...c.env }
        const message = yield* failure(env, c.raw ?? c.file)
        expect(message).toEqual(c.message)
      }))
  }

  it.effect("the new listener settings: trusted proxies, PROXY protocol, timeouts, drain delay, the registry port", () =>
    Effect.gen(function*() {
      const config = yield* load({
        ...TOKEN,
        PINBOARD_TRUSTED_PROXIES: "10.0.0.0/8, fd00::/8,127.0.0.1",
        PINBOARD_PROXY_PROTOCOL: "1",
        PINBOARD_KEEPALIVE_TIMEOUT_MS: "65000",
        PINBOARD_HEADERS_TIMEOUT_MS: "20000",
        PINBOARD_DRAIN_DELAY_MS: "5000",
        PINBOARD_REGISTRY_PORT: "8081",
        PINBOARD_REGISTRY_HOST: "10.1.2.3"
      })
      expect(config.trustedProxies).toStrictEqual(["10.0.0.0/8", "fd00::/8", "127.0.0.1"])
      expect(config.proxyProtocol).toBe(true)
      expect(config.server).toStrictEqual({ keepAliveTimeoutMs: 65000, headersTimeoutMs: 20000 })
      expect(config.shutdown).toStrictEqual({ drainDelayMs: 5000, graceMs: 10000 })
      expect(config.registry).toStrictEqual({ maxClockOffsetMs: 1000, port: 8081, host: "10.1.2.3" })
    }))

  it.effect("the HTTP/2 settings", () =>
    Effect.gen(function*() {
      const config = yield* load({
        ...TOKEN,
        PINBOARD_HTTP2: "0",
        PINBOARD_H2C: "1",
        PINBOARD_HTTP2_MAX_CONCURRENT_STREAMS: "7",
        PINBOARD_HTTP2_MAX_HEADER_LIST_SIZE: "8192",
        PINBOARD_HTTP2_STREAM_RESET_BURST: "10",
        PINBOARD_HTTP2_STREAM_RESET_RATE: "2"
      })
      expect(config.http2).toStrictEqual({ enabled: false, h2c: true, maxConcurrentStreams: 7, maxHeaderListSize: 8192, streamResetBurst: 10, streamResetRate: 2 })
    }))

  it.effect("every mistyped variable is named, before the file is read", () =>
    Effect.gen(function*() {
      const message = yield* failure({ ...TOKEN, PINBOARD_LEASEMS: "1", PINBOARD_URL: "http://pinboard:8080", PINBOARD_TRUSTED_PROXY: "10.0.0.1" }, "not JSON")
      expect(message.split("\n")).toStrictEqual([
        "PINBOARD_LEASEMS: unknown variable; did you mean PINBOARD_LEASE_MS?",
        "PINBOARD_TRUSTED_PROXY: unknown variable; did you mean PINBOARD_TRUSTED_PROXIES?"
      ])
    }))

  it.effect("invalid JSON is named with its file", () =>
    Effect.gen(function*() {
      const message = yield* failure(TOKEN, "{ port: 1 }")
      expect(message).toMatch(/^config file ".*config-\d+\.json" \(from --config\): invalid JSON \(.+\)$/)
    }))

  it.effect("JSON that is not an object is named with its file", () =>
    Effect.gen(function*() {
      const message = yield* failure(TOKEN, "[1, 2]")
      expect(message).toMatch(/^config file ".*config-\d+\.json" \(from --config\): expected a JSON object$/)
    }))

  it.effect("several mistakes are all reported, one per line (rules across fields, the token's among them, once the fields are valid)", () =>
    Effect.gen(function*() {
      const message = yield* failure({ PINBOARD_PORT: "x" }, { buckets: 0, typo: 1 })
      expect(message.split("\n").sort()).toStrictEqual([
        `PINBOARD_PORT: expected an integer from 1 to 65535, got "x"`,
        "buckets: expected an integer from 1 to 16384, got 0",
        expect.stringMatching(/^typo: unknown option/)
      ])
    }))

  it.effect("a token is never echoed back", () =>
    Effect.gen(function*() {
      const message = yield* failure({}, { token: 424242 })
      expect(message).toBe("token: expected a non-empty string")
    }))

  it.effect("a missing file is named", () =>
    Effect.gen(function*() {
      const path = join(dir, "absent.json")
      const message = yield* loadConfig({ flags: {}, env: { ...TOKEN, PINBOARD_CONFIG: path } }).pipe(
        Effect.flip,
        Effect.map((e) => e.message)
      )
      expect(message).toMatch(new RegExp(`^config file "${path}" \\(from PINBOARD_CONFIG\\): cannot read it \\(ENOENT`))
    }))

  it.effect("an unreadable file (a directory) is named", () =>
    Effect.gen(function*() {
      const message = yield* loadConfig({ flags: { config: dir }, env: TOKEN }).pipe(
        Effect.flip,
        Effect.map((e) => e.message)
      )
      expect(message).toMatch(new RegExp(`^config file "${dir}" \\(from --config\\): cannot read it \\(EISDIR`))
    }))
})

describe("credentials by role (docs/deploy.md \"Credentials\"), read at start", () => {
  const sha = (key: string) => createHash("sha256").update(key).digest("hex")
  const operators = [{ name: "oncall", sha256: sha("operator-key") }]
  const workers = [{ name: "chat", sha256: sha("chat-key"), workers: ["chat-*"], namespaces: ["/threads"] }]
  const keyFile = (name: string) => {
    const path = join(dir, name)
    writeFileSync(path, generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }))
    return path
  }
  const [a, b] = [keyFile("a.pem"), keyFile("b.pem")]

  it.effect("with credentials the token is optional; without either, exit 2", () =>
    Effect.gen(function*() {
      const config = yield* load({ PINBOARD_ATTESTATION_KEYS: `${a}, ${b}` }, { credentials: { operators } })
      expect(config.token).toBeUndefined()
      expect(config.attestation.keys).toEqual([a, b])
      expect(yield* failure({}, {})).toBe(`token: required; set PINBOARD_TOKEN or "token" in the config file, or credentials (PINBOARD_CREDENTIALS_FILE)`)
    }))

  it.effect("no deployment token and no attestation keys: nothing could sign attestations", () =>
    Effect.gen(function*() {
      expect(yield* failure({}, { credentials: { operators } })).toMatch(/^attestation\.keys: expected attestation keys \(PINBOARD_ATTESTATION_KEYS\) without a deployment token/)
    }))

  it.effect("PINBOARD_CREDENTIALS_FILE names a file, checked at start", () =>
    Effect.gen(function*() {
      const path = writeConfig({ operators, workers })
      const config = yield* load({ ...TOKEN, PINBOARD_CREDENTIALS_FILE: path, PINBOARD_ATTESTATION_KEYS: a })
      expect(config.credentials).toBe(path)
      const bad = writeConfig({ operators: [{ name: "oncall", sha256: "nope" }] })
      expect(yield* failure({ ...TOKEN, PINBOARD_CREDENTIALS_FILE: bad })).toBe(
        `PINBOARD_CREDENTIALS_FILE: credentials file ${JSON.stringify(bad)}: operators[0].sha256: expected 64 hex digits (a SHA-256), got "nope"`
      )
      expect(yield* failure({ ...TOKEN, PINBOARD_CREDENTIALS_FILE: join(dir, "absent.json") })).toMatch(/^PINBOARD_CREDENTIALS_FILE: credentials file ".*absent\.json": cannot read it/)
    }))

  it.effect("an attestation key file that is not an Ed25519 private key: exit 2 naming the file", () =>
    Effect.gen(function*() {
      const rsa = join(dir, "rsa.pem")
      writeFileSync(rsa, generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey.export({ type: "pkcs8", format: "pem" }))
      expect(yield* failure({ ...TOKEN, PINBOARD_ATTESTATION_KEYS: `${a},${rsa}` })).toBe(
        `PINBOARD_ATTESTATION_KEYS: ${JSON.stringify(rsa)}: expected an Ed25519 private key, got an rsa key`
      )
      expect(yield* failure(TOKEN, { attestation: { keys: [join(dir, "absent.pem")] } })).toMatch(/^attestation\.keys: ".*absent\.pem": /)
    }))

  it.effect("worker credentials without attestation keys: exit 2", () =>
    Effect.gen(function*() {
      expect(yield* failure(TOKEN, { credentials: { workers } })).toMatch(/^credentials\.workers: expected attestation keys/)
    }))

  it.effect("credentials is an object or a file's name", () =>
    Effect.gen(function*() {
      expect(yield* failure(TOKEN, { credentials: 3 })).toBe("credentials: expected a credentials file's name, or a credentials object, got 3")
    }))
})

describe("the files of the Redis settings (docs/config.md), read at start", () => {
  const PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
  const fileWith = (content: string): string => {
    const path = join(dir, `redis-file-${++files}`)
    writeFileSync(path, content)
    return path
  }

  it.effect("the password file's line is the password, without its final line break", () =>
    Effect.gen(function* () {
      const config = yield* load({ ...TOKEN, PINBOARD_REDIS_URL: "redis://cache:6379", PINBOARD_REDIS_PASSWORD_FILE: fileWith("s3cret pass\n") })
      expect(config.redis.passwordFile).toBeDefined()
      const files = readRedisFiles(config.redis)
      expect(files._tag === "Success" && files.success.password !== undefined && Redacted.value(files.success.password)).toBe("s3cret pass")
    })
  )

  it.effect("a file that cannot be read, an empty password file or a TLS file that is not PEM: exit 2 naming the setting", () =>
    Effect.gen(function* () {
      const redis = { ...TOKEN, PINBOARD_REDIS_URL: "rediss://cache:6380" }
      expect(yield* failure({ ...redis, PINBOARD_REDIS_PASSWORD_FILE: join(dir, "absent") })).toMatch(
        /^PINBOARD_REDIS_PASSWORD_FILE: cannot read ".*absent" \(ENOENT/
      )
      expect(yield* failure({ ...redis, PINBOARD_REDIS_PASSWORD_FILE: fileWith("\n") })).toBe(
        "PINBOARD_REDIS_PASSWORD_FILE: expected a file holding the password, got an empty one"
      )
      const notPem = fileWith("hello")
      expect(yield* failure({ ...redis, PINBOARD_REDIS_TLS_CA: notPem })).toBe(
        `PINBOARD_REDIS_TLS_CA: expected a PEM file, got ${JSON.stringify(notPem)} without a "-----BEGIN" line`
      )
      expect(yield* failure(TOKEN, { redis: { url: "rediss://cache:6380", tlsCert: fileWith(PEM), tlsKey: join(dir, "absent.key") } })).toMatch(
        /^redis\.tlsKey: cannot read ".*absent\.key"/
      )
      const ok = yield* load({ ...redis, PINBOARD_REDIS_TLS_CA: fileWith(PEM) })
      expect(ok.redis.tlsCa).toBeDefined()
    })
  )
})
