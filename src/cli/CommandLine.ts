// Pinboard's command line (docs/config.md "Command line"): a command, then its flags. Read
// with node:util parseArgs in strict mode, so an unknown flag or command is a usage error.
import { parseArgs } from "node:util"
import { Data, Result } from "effect"
import type { CommandLineFlags } from "../config/Sources.js"

export type Command =
  | { readonly _tag: "Serve"; readonly flags: CommandLineFlags }
  | { readonly _tag: "Config"; readonly flags: CommandLineFlags }
  /** What follows `inspect`, read by its own parser. */
  | { readonly _tag: "Inspect"; readonly argv: ReadonlyArray<string> }
  | { readonly _tag: "Help" }
  | { readonly _tag: "Version" }

export class UsageError extends Data.TaggedError("UsageError")<{ readonly message: string }> {}

const PINBOARD_OPTIONS = {
  help: { type: "boolean", short: "h" },
  version: { type: "boolean", short: "V" },
  config: { type: "string" },
  port: { type: "string" },
  host: { type: "string" },
  "redis-url": { type: "string" }
} as const

const COMMANDS = ["serve", "config", "inspect", "help"] as const

export const parseCommandLine = (argv: ReadonlyArray<string>): Result.Result<Command, UsageError> => {
  const usage = (message: string) => Result.fail(new UsageError({ message }))
  if (argv[0] === "inspect") return Result.succeed({ _tag: "Inspect", argv: argv.slice(1) })
  let parsed
  try {
    parsed = parseArgs({ args: [...argv], options: PINBOARD_OPTIONS, allowPositionals: true, strict: true })
  } catch (error) {
    // Node's first sentence says what is wrong; its hints about `--` do not apply here.
    const message = error instanceof Error ? error.message : String(error)
    return usage(message.split("\n")[0]!.replace(/\. To specify .*$/, "."))
  }
  const { values, positionals } = parsed
  if (values.help === true) return Result.succeed({ _tag: "Help" })
  if (values.version === true) return Result.succeed({ _tag: "Version" })
  const [command = "serve", ...rest] = positionals
  if (rest.length > 0) return usage(`unexpected argument ${JSON.stringify(rest[0])}`)
  const empty = (["config", "port", "host", "redis-url"] as const).find((name) => values[name] === "")
  if (empty !== undefined) return usage(`--${empty}: expected a value`)
  const flags: CommandLineFlags = { config: values.config, port: values.port, host: values.host, redisUrl: values["redis-url"] }
  switch (command) {
    case "serve":
      return Result.succeed({ _tag: "Serve", flags })
    case "config":
      return Result.succeed({ _tag: "Config", flags })
    case "help":
      return Result.succeed({ _tag: "Help" })
    case "inspect":
      return usage("inspect comes first: pinboard inspect ...")
    default:
      return usage(`unknown command ${JSON.stringify(command)}: expected one of ${COMMANDS.join(", ")}`)
  }
}
