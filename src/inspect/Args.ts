// The `pinboard inspect` command line (docs/inspect.md), read with node:util parseArgs.
// Names are checked against the registry API's own formats, so that a typo is a usage
// error here (exit 2) rather than a 400 from Pinboard.
import { parseArgs } from "node:util"
import { Data, Result, Schema } from "effect"
import { isValidId, isValidNamespace } from "../Address.js"
import { EnvName, Hostname, WorkerId } from "../http/RegistryBodies.js"

export const USAGE = `Usage:
  pinboard inspect workers [--pinboard URL] [--json]
  pinboard inspect id <namespace> <id> [--env ENV] [--host HOSTNAME] [--affinity VALUE]
                      [--caller WORKER] [--pinboard URL] [--json]

Reads Pinboard's registry API with the deployment token of Pinboard's own configuration
(environment, --config FILE or PINBOARD_CONFIG), or with the operator key in --key-file.

  workers           every registered worker: lease left, headroom, flags
  id                an id's bucket, its placement, and what a resolve would do now
                    (<namespace> with or without the leading "/")

  --pinboard URL    Pinboard's base URL (default: from the configuration: the registry's
                    own listener, else the data port, https with TLS on)
  --json            print JSON instead of text
  --env ENV         the id's env (default "")
  --host HOSTNAME   hostname-aware mode: the request's hostname; only workers registered
                    for it are candidates
  --affinity VALUE  the affinity value for rendezvous (default ""; Pinboard uses the client IP,
                    or the header or cookie that affinity.key names)
  --caller WORKER   the worker an attested call comes from (preferred while it is a candidate)
  --config FILE     Pinboard's configuration file
  --key-file FILE   a file holding an operator key (credentials by role), used in place of
                    the deployment token
  -h, --help        print this help

Exit codes: 0 done; 1 Pinboard unreachable or answered an error; 2 bad usage or configuration.`

export class InspectUsageError extends Data.TaggedError("InspectUsageError")<{ readonly message: string }> {}

export interface CommonOptions {
  /** Overrides the URL derived from the configuration; no trailing "/". */
  readonly pinboard: string | undefined
  readonly json: boolean
  /** `--config FILE`, handed to loadConfig as Pinboard itself reads it. */
  readonly config: string | undefined
  /** `--key-file FILE`: an operator key to present instead of the configuration's deployment token. */
  readonly keyFile: string | undefined
}

export type InspectCommand =
  | { readonly _tag: "Help" }
  | { readonly _tag: "Workers"; readonly options: CommonOptions }
  | {
    readonly _tag: "Id"
    readonly options: CommonOptions
    /** With the leading "/". */
    readonly namespace: string
    readonly id: string
    readonly env: string
    /** Lowercased; undefined when not given. */
    readonly hostname: string | undefined
    /** Undefined when not given: "" is used, and the output says what Pinboard would use. */
    readonly affinity: string | undefined
    readonly caller: string | undefined
  }

const INSPECT_OPTIONS = {
  pinboard: { type: "string" },
  json: { type: "boolean" },
  env: { type: "string" },
  host: { type: "string" },
  affinity: { type: "string" },
  caller: { type: "string" },
  config: { type: "string" },
  "key-file": { type: "string" },
  help: { type: "boolean", short: "h" }
} as const

const ID_ONLY = ["env", "host", "affinity", "caller"] as const

/** `argv` is what follows `inspect`. */
export const parseInspectArgs = (argv: ReadonlyArray<string>): Result.Result<InspectCommand, InspectUsageError> => {
  const usage = (message: string) => Result.fail(new InspectUsageError({ message }))
  let parsed
  try {
    parsed = parseArgs({ args: [...argv], options: INSPECT_OPTIONS, allowPositionals: true, strict: true })
  } catch (error) {
    return usage(error instanceof Error ? error.message : String(error))
  }
  const { values, positionals } = parsed
  if (values.help === true) return Result.succeed({ _tag: "Help" })
  const pinboard = values.pinboard === undefined ? Result.succeed(undefined) : parsePinboardUrl(values.pinboard)
  if (Result.isFailure(pinboard)) return usage(pinboard.failure)
  const options: CommonOptions = { pinboard: pinboard.success, json: values.json === true, config: values.config, keyFile: values["key-file"] }

  const [subcommand, ...rest] = positionals
  switch (subcommand) {
    case "workers": {
      if (rest.length > 0) return usage(`workers takes no arguments (got ${JSON.stringify(rest[0])})`)
      const misplaced = ID_ONLY.find((name) => values[name] !== undefined)
      if (misplaced !== undefined) return usage(`--${misplaced} applies to inspect id only`)
      return Result.succeed({ _tag: "Workers", options })
    }
    case "id": {
      if (rest.length !== 2) return usage("id takes <namespace> <id>")
      const namespace = rest[0]!.startsWith("/") ? rest[0]! : `/${rest[0]!}`
      const id = rest[1]!
      if (!isValidNamespace(namespace)) return usage(`namespace: expected "/" followed by 1-128 characters of [A-Za-z0-9._~-], got ${JSON.stringify(rest[0])}`)
      if (!isValidId(id)) return usage(`id: expected 1-256 characters of [A-Za-z0-9._~-], got ${JSON.stringify(id)}`)
      const env = values.env ?? ""
      if (!Schema.is(EnvName)(env)) return usage(`--env: expected 0-128 characters of [A-Za-z0-9._~-], got ${JSON.stringify(env)}`)
      const hostname = values.host?.toLowerCase()
      if (hostname !== undefined && !Schema.is(Hostname)(hostname)) {
        return usage(`--host: expected a hostname without a port (1-253 characters of [A-Za-z0-9.-]), got ${JSON.stringify(values.host)}`)
      }
      if (values.caller !== undefined && !Schema.is(WorkerId)(values.caller)) {
        return usage(`--caller: expected a worker id (1-128 characters of [A-Za-z0-9._~-]), got ${JSON.stringify(values.caller)}`)
      }
      return Result.succeed({ _tag: "Id", options, namespace, id, env, hostname, affinity: values.affinity, caller: values.caller })
    }
    case undefined:
      return usage("expected a subcommand: workers or id")
    default:
      return usage(`unknown subcommand ${JSON.stringify(subcommand)}: expected workers or id`)
  }
}

const parsePinboardUrl = (raw: string): Result.Result<string, string> => {
  const url = URL.canParse(raw) ? new URL(raw) : undefined
  return url !== undefined && (url.protocol === "http:" || url.protocol === "https:") && url.search === "" && url.hash === ""
    ? Result.succeed(raw.replace(/\/+$/, ""))
    : Result.fail(`--pinboard: expected an http: or https: URL, got ${JSON.stringify(raw)}`)
}
