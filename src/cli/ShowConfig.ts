// `pinboard config`: every option in effect, in the file's names, with where its value came
// from (a flag, a variable, the file, or the default). Secrets are never printed.
import { Schema } from "effect"
import type { LoadedConfig } from "../Config.js"
import { PinboardConfigSchema } from "../config/Schema.js"
import { isPlainObject, lookup, SECRET_KEYS } from "../config/Sources.js"

const REDACTED = "(redacted)"

/** A URL's password, if it has one, is a secret too. */
const withoutPassword = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.password === "") return url
    parsed.password = "redacted"
    return parsed.toString()
  } catch {
    return url
  }
}

interface ConfigRow {
  readonly path: ReadonlyArray<string>
  readonly value: string
}

/** The file-shaped value for what it prints, the decoded one for the keys the file shape leaves out when unset. */
const rowsOf = (encoded: unknown, decoded: unknown, path: ReadonlyArray<string>): Array<ConfigRow> => {
  const key = path[path.length - 1] ?? ""
  if (SECRET_KEYS.has(key)) return [{ path, value: encoded === undefined ? "unset" : REDACTED }]
  if (isPlainObject(encoded) || (encoded === undefined && isPlainObject(decoded))) {
    const keys = new Set([...(isPlainObject(decoded) ? Object.keys(decoded) : []), ...Object.keys(encoded ?? {})])
    if (keys.size > 0) {
      return [...keys].flatMap((child) => rowsOf(lookup(encoded, [child]), lookup(decoded, [child]), [...path, child]))
    }
  }
  if (encoded === undefined) return [{ path, value: "unset" }]
  if (typeof encoded === "string") return [{ path, value: key === "url" ? withoutPassword(encoded) : encoded }]
  return [{ path, value: JSON.stringify(encoded) }]
}

const sourceOf = (loaded: LoadedConfig, path: ReadonlyArray<string>): string => {
  const set = loaded.sources.find((s) => s.envVar.path.join(".") === path.join("."))
  if (set !== undefined) return set.name.startsWith("--") ? `flag ${set.name}` : `environment ${set.name}`
  if (loaded.file._tag === "File" && lookup(loaded.fileContent, path) !== undefined) return `file ${loaded.file.path}`
  return "default"
}

export const configText = (loaded: LoadedConfig): string => {
  const encoded = Schema.encodeSync(PinboardConfigSchema)(loaded.config)
  const rows = rowsOf(encoded, loaded.config, []).map((row) => [row.path.join("."), row.value, sourceOf(loaded, row.path)] as const)
  const pathWidth = Math.max(...rows.map(([path]) => path.length))
  const valueWidth = Math.max(...rows.map(([, value]) => value.length))
  const file = loaded.file._tag === "File" ? `${loaded.file.path} (from ${loaded.file.from})` : "none"
  return [
    `# the configuration in effect; config file: ${file}; secrets redacted`,
    ...rows.map(([path, value, source]) => `${path.padEnd(pathWidth + 2)}${value.padEnd(valueWidth + 2)}${source}`)
  ].join("\n")
}
