// Where configuration comes from (DESIGN 2): environment > JSON file > defaults.
// Environment values are strings; they are turned into the file's JSON types and
// laid over the file's object, so one Schema validates both.
import { parseArgs } from "node:util"

export type Path = ReadonlyArray<string>

export interface EnvVar {
  readonly name: string
  readonly path: Path
  readonly kind: "string" | "number" | "boolean" | "list"
  /** Replaces the schema's "expected …" where the environment spells a value its own way. */
  readonly expected?: string
}

export const ENV_VARS: ReadonlyArray<EnvVar> = [
  { name: "PINBOARD_PORT", path: ["port"], kind: "number" },
  { name: "PINBOARD_HOST", path: ["host"], kind: "string" },
  { name: "PINBOARD_TOKEN", path: ["token"], kind: "string" },
  { name: "PINBOARD_REDIS_URL", path: ["redis", "url"], kind: "string" },
  {
    name: "PINBOARD_REDIS_CLUSTER",
    path: ["redis", "cluster"],
    kind: "list",
    expected: "expected a comma-separated list of host:port"
  },
  { name: "PINBOARD_REDIS_PREFIX", path: ["redis", "prefix"], kind: "string" },
  { name: "PINBOARD_BUCKETS", path: ["buckets"], kind: "number" },
  { name: "PINBOARD_LEASE_MS", path: ["leaseMs"], kind: "number" },
  { name: "PINBOARD_HOSTNAME_AWARE", path: ["hostnameAware"], kind: "boolean", expected: "expected 1, 0, true or false" },
  { name: "PINBOARD_METRICS_PORT", path: ["metrics", "port"], kind: "number" },
  { name: "PINBOARD_LOG_LEVEL", path: ["log", "level"], kind: "string" },
  { name: "PINBOARD_ACCESS_LOG", path: ["log", "access"], kind: "boolean", expected: "expected 1, 0, true or false" },
  { name: "PINBOARD_OTLP_ENDPOINT", path: ["otlp", "endpoint"], kind: "string" }
]

export type Env = Readonly<Record<string, string | undefined>>

/** An environment value that was laid over the file, kept to name it in messages. */
export interface EnvSource {
  readonly envVar: EnvVar
  readonly raw: string
}

export type ConfigFileArgument =
  | { readonly _tag: "None" }
  | { readonly _tag: "File"; readonly path: string; readonly from: "--config" | "PINBOARD_CONFIG" }
  | { readonly _tag: "Missing" }

const CONFIG_OPTION = { config: { type: "string" } } as const

/**
 * `--config FILE` or `--config=FILE` in argv (the first one counts; none after `--`), else
 * `PINBOARD_CONFIG`. The command line wins. Other arguments are ignored.
 */
export const configFileArgument = (argv: ReadonlyArray<string>, env: Env): ConfigFileArgument => {
  const { tokens } = parseArgs({ args: [...argv], options: CONFIG_OPTION, strict: false, allowPositionals: true, tokens: true })
  const option = tokens.find((token) => token.kind === "option" && token.name === "config")
  if (option?.kind === "option") {
    const path = option.value
    // parseArgs takes whatever follows `--config` as its value; another flag there means no path was given.
    const missing = path === undefined || path === "" || (!option.inlineValue && path.startsWith("--"))
    return missing ? { _tag: "Missing" } : { _tag: "File", path, from: "--config" }
  }
  const fromEnv = env["PINBOARD_CONFIG"]
  return fromEnv === undefined || fromEnv === "" ? { _tag: "None" } : { _tag: "File", path: fromEnv, from: "PINBOARD_CONFIG" }
}

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
 * The file's object with every set environment variable laid over it. An empty
 * variable counts as unset (`FOO=` is how shells and compose files leave one out).
 * A value is not laid into a file entry that is not an object, so that the file's
 * own mistake is still reported.
 */
export const overlayEnv = (
  file: Record<string, unknown>,
  env: Env
): { readonly input: Record<string, unknown>; readonly sources: ReadonlyArray<EnvSource> } => {
  const input: Record<string, unknown> = structuredClone(file)
  const sources: Array<EnvSource> = []
  for (const envVar of ENV_VARS) {
    const raw = env[envVar.name]
    if (raw === undefined || raw === "") continue
    const parent = objectAt(input, envVar.path.slice(0, -1))
    const leaf = envVar.path[envVar.path.length - 1]
    if (parent === undefined || leaf === undefined) continue
    parent[leaf] = fromEnvString(envVar.kind, raw)
    sources.push({ envVar, raw })
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
