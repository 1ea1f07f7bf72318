#!/usr/bin/env node
// Pinboard's entry point: read the command line (src/cli/CommandLine.ts), then run the proxy
// until SIGTERM, print help, the version or the configuration, or run `pinboard inspect`
// (docs/inspect.md). Each command loads only its own modules.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Console, Effect, Result, Layer, Option } from "effect"
import { parseCommandLine } from "./cli/CommandLine.js"
import { loadConfig, loadConfigWithSources } from "./Config.js"
import { logLayer } from "./observe/Log.js"
import { ListenFailed } from "./serving/Listen.js"

/** Exit codes (`pinboard --help`): 2 for bad usage or an invalid configuration. */
const exitWith = (code: number, message: string) =>
  Effect.sync(() => {
    process.stderr.write(`pinboard: ${message}\n`)
    process.exit(code)
  })

const program = Effect.gen(function* () {
  const parsed = parseCommandLine(process.argv.slice(2))
  if (Result.isFailure(parsed)) {
    const { usageText } = yield* Effect.promise(() => import("./cli/Help.js"))
    return yield* exitWith(2, `${parsed.left.message}\n\n${usageText}\n\nRun \`pinboard --help\` for every option.`)
  }
  const command = parsed.right
  switch (command._tag) {
    case "Help":
    case "Version": {
      const { packageVersion } = yield* Effect.promise(() => import("./cli/Version.js"))
      if (command._tag === "Version") return yield* Console.log(packageVersion())
      const { helpText } = yield* Effect.promise(() => import("./cli/Help.js"))
      return yield* Console.log(helpText(packageVersion()))
    }
    case "Inspect": {
      const { inspect } = yield* Effect.promise(() => import("./inspect/Inspect.js"))
      return yield* inspect(command.argv, process.env)
    }
    case "Config": {
      const { configText } = yield* Effect.promise(() => import("./cli/ShowConfig.js"))
      const loaded = yield* loadConfigWithSources({ flags: command.flags, env: process.env })
      return yield* Console.log(configText(loaded))
    }
    case "Serve": {
      const { appLayer } = yield* Effect.promise(() => import("./App.js"))
      const config = yield* loadConfig({ flags: command.flags, env: process.env })
      // Launched until SIGTERM or SIGINT interrupts it; the last line once everything is released.
      return yield* Layer.launch(appLayer(config)).pipe(
        Effect.onInterrupt(() => Effect.logInfo("pinboard stopped")),
        Effect.provide(logLayer(config.log.level)),
        Effect.catchSomeDefect((defect) => (defect instanceof ListenFailed ? Option.some(exitWith(1, defect.message)) : Option.none()))
      )
    }
  }
}).pipe(Effect.catchTag("ConfigInvalid", (error) => exitWith(2, `invalid configuration: ${error.message}`)))

NodeRuntime.runMain(program, { disablePrettyLogger: true })
