// `pinboard --help`: the commands, every flag and environment variable with its default, and
// the exit codes. Defaults are read off the configuration's Schema, so they cannot drift.
import { Schema } from "effect"
import { ENV_VARS, FLAG_VARS, lookup } from "../config/Sources.js"
import { PinboardConfigSchema } from "../config/Schema.js"

const defaults: unknown = Schema.encodeSync(PinboardConfigSchema)(Schema.decodeUnknownSync(PinboardConfigSchema)({ token: "-" }))

const defaultOf = (name: string, path: ReadonlyArray<string>): string => {
  if (name === "PINBOARD_TOKEN") return "required"
  const value = lookup(defaults, path)
  if (Array.isArray(value)) return value.length === 0 ? "none" : value.join(",")
  return value === undefined ? "unset" : String(value)
}

const indentedTable = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  return rows
    .map((row) => `  ${row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]! + 2))).join("")}`.trimEnd())
    .join("\n")
}

const flagRows = (): ReadonlyArray<ReadonlyArray<string>> => [
  ["--config FILE", "PINBOARD_CONFIG", "none", "a JSON configuration file"],
  ...FLAG_VARS.map(({ flag, metavar, envVar }) => {
    const variable = ENV_VARS.find((v) => v.name === envVar)!
    return [`${flag} ${metavar}`, envVar, defaultOf(envVar, variable.path), variable.summary]
  })
]

/** The commands: printed with a usage error too. */
export const usageText = `Usage:
${indentedTable([
  ["pinboard [serve] [FLAGS]", "run Pinboard until SIGTERM or SIGINT (the default command)"],
  ["pinboard config [FLAGS]", "print the configuration in effect and where each value comes from"],
  ["pinboard inspect ...", "read the registry: workers, an id's placement (pinboard inspect --help)"],
  ["pinboard help, -h, --help", "print this help"],
  ["pinboard -V, --version", "print the version"]
])}`

export const helpText = (version: string): string => `pinboard ${version}: a reverse proxy that gives every id one live owner.

${usageText}

Flags (a flag wins over its variable, a variable over the file, the file over the default):
${indentedTable([["FLAG", "VARIABLE", "DEFAULT", ""], ...flagRows()])}

Environment variables (every option, with the file's names: docs/config.md):
${indentedTable([["VARIABLE", "DEFAULT", ""], ...ENV_VARS.map((v) => [v.name, defaultOf(v.name, v.path), v.summary])])}

Exit codes:
  0  stopped by SIGTERM or SIGINT after draining; or help, the version or the configuration printed
  1  failed while running (a port that cannot be bound, Redis unreachable at start)
  2  bad usage (an unknown flag or command) or an invalid configuration
`
