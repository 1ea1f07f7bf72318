// Pinboard's configuration (docs/config.md): flags > environment > JSON file > defaults,
// validated by one Schema. An invalid value is a ConfigInvalid whose message names
// the field or variable and what was expected; main prints it and exits with 2.
// Options and variables: docs/config.md.
import { readFileSync } from "node:fs"
import { Effect, Result, Schema, SchemaParser } from "effect"
import { DEFAULT_TAKEOVER, type Takeover } from "./config/Fields.js"
import { describeParseError, formatPath } from "./config/Messages.js"
import { readRedisFiles } from "./config/RedisFiles.js"
import { loadAttestationKeys } from "./config/AttestationKeys.js"
import { credentialSourceOf, describeSource, loadCredentialSet } from "./config/CredentialSet.js"
import { loadTlsPair, tlsFilesOf } from "./serving/Tls.js"
import { type PinboardConfig, PinboardConfigSchema } from "./config/Schema.js"
import { nearest } from "./config/Nearest.js"
import {
  type CommandLineFlags, type ConfigFileArgument, configFileArgument, type Env, type EnvSource, isPlainObject, KNOWN_VARS, overlayEnv, unknownVariables
} from "./config/Sources.js"

export type { AffinityKey, Takeover } from "./config/Fields.js"
export type { ApiKeyProviderConfig, JwtProviderConfig, NamespaceRule, ProviderConfig } from "./config/Auth.js"
export { type PinboardConfig, type PinboardConfigFile, PinboardConfigSchema } from "./config/Schema.js"
export { type CommandLineFlags, ENV_VARS } from "./config/Sources.js"

export class ConfigInvalid extends Schema.TaggedError<ConfigInvalid>()("ConfigInvalid", { message: Schema.String }) {}

const readConfigFile = (arg: ConfigFileArgument): Effect.Effect<Record<string, unknown>, ConfigInvalid> => {
  switch (arg._tag) {
    case "None":
      return Effect.succeed({})
  }
  const file = `config file ${JSON.stringify(arg.path)} (from ${arg.from})`
  return Effect.try({
    try: () => readFileSync(arg.path, "utf8"),
    catch: (e) => new ConfigInvalid({ message: `${file}: cannot read it (${errorText(e)})` })
  }).pipe(
    Effect.flatMap((text) =>
      Effect.try({
        try: (): unknown => JSON.parse(text),
        catch: (e) => new ConfigInvalid({ message: `${file}: invalid JSON (${errorText(e)})` })
      })
    ),
    Effect.filterOrFail(isPlainObject, () => new ConfigInvalid({ message: `${file}: expected a JSON object` }))
  )
}

const unknownVariableMessage = (name: string): string => {
  const near = nearest(name, KNOWN_VARS)
  return `${name}: unknown variable; ${near === undefined ? "pinboard --help lists every one" : `did you mean ${near}?`}`
}

/** Each line of a loaded file's problems, prefixed with the setting that named it and what it is. */
const problemLines = (setting: string, what: string, problems: string): string =>
  problems
    .split("\n")
    .map((line) => (setting === what ? `${setting}.${line}` : `${setting}: ${what}: ${line}`))
    .join("\n")

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e))

const decodeConfig = SchemaParser.decodeUnknownEffect(PinboardConfigSchema, { onExcessProperty: "error", errors: "all" })

/** The configuration, with what it was read from: for `pinboard config` to say where each value came from. */
export interface LoadedConfig {
  readonly config: PinboardConfig
  readonly file: ConfigFileArgument
  readonly fileContent: Record<string, unknown>
  readonly sources: ReadonlyArray<EnvSource>
}

export const loadConfigWithSources: (input: {
  readonly flags: CommandLineFlags
  readonly env: Env
}) => Effect.Effect<LoadedConfig, ConfigInvalid> = Effect.fn("Config.load")(function*({ flags, env }) {
  const unknown = unknownVariables(env)
  if (unknown.length > 0) return yield* new ConfigInvalid({ message: unknown.map(unknownVariableMessage).join("\n") })
  const file = configFileArgument(flags, env)
  const fileContent = yield* readConfigFile(file)
  const { input, sources } = overlayEnv(fileContent, env, flags)
  const config = yield* decodeConfig(input).pipe(
    Effect.mapError((error) => new ConfigInvalid({ message: describeParseError(error, input, sources) }))
  )
  // A file a setting names that cannot be used is named by the variable (or key) that set it.
  const settingName = (path: ReadonlyArray<string>): string =>
    sources.find((source) => source.envVar.path.join(".") === path.join("."))?.name ?? formatPath(path)
  const fileProblem = (section: string) => (problem: { readonly field: string; readonly message: string }) =>
    new ConfigInvalid({ message: `${settingName([section, problem.field])}: ${problem.message}` })
  yield* Effect.fromResult(Result.mapError(readRedisFiles(config.redis), fileProblem("redis")))
  const credentials = credentialSourceOf(config.credentials)
  if (credentials !== undefined) {
    const named = settingName(["credentials"])
    yield* Effect.fromResult(
      Result.mapError(loadCredentialSet(credentials, config), (problem) => new ConfigInvalid({ message: problemLines(named, describeSource(credentials), problem) }))
    )
  }
  if (config.attestation.keys.length > 0) {
    const named = settingName(["attestation", "keys"])
    yield* Effect.fromResult(
      Result.mapError(loadAttestationKeys(config.attestation.keys), (problem) => new ConfigInvalid({ message: `${named}: ${JSON.stringify(problem.path)}: ${problem.message}` }))
    )
  }
  const tls = tlsFilesOf(config.tls)
  if (tls !== undefined) yield* Effect.fromResult(Result.mapError(loadTlsPair(tls), fileProblem("tls")))
  return { config, file, fileContent, sources }
})

export const loadConfig = (input: { readonly flags: CommandLineFlags; readonly env: Env }): Effect.Effect<PinboardConfig, ConfigInvalid> =>
  Effect.map(loadConfigWithSources(input), (loaded) => loaded.config)

/** No Redis URL, Cluster seeds or Sentinels: the registry is embedded in this process (docs/deploy.md). */
export const usesEmbeddedRegistry = (config: PinboardConfig): boolean =>
  config.redis.url === undefined && config.redis.cluster === undefined && config.redis.sentinels === undefined

/** How takeover works in an env (docs/protocol.md "Resolution"): `wind_down` unless `envs.<env>.takeover` says otherwise. */
export const takeoverOf =
  (config: PinboardConfig) =>
  (env: string): Takeover =>
    config.envs[env]?.takeover ?? DEFAULT_TAKEOVER
