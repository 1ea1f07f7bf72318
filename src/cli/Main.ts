// Pinboard's program, started by src/main.ts once the Node.js version is known to be one it
// runs on: read the command line (cli/CommandLine.ts), then run the proxy until SIGTERM, print
// help, the version or the configuration, or run `pinboard inspect` (docs/inspect.md). Each
// command loads only its own modules.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Console, Effect, Exit, Layer, Result, Runtime } from "effect"
import { loadConfig, loadConfigWithSources } from "../Config.js"
import { logLayer } from "../observe/Log.js"
import { ListenFailed } from "../serving/Listen.js"
import { parseCommandLine } from "./CommandLine.js"

/** Exit codes (`pinboard --help`): 2 for bad usage or an invalid configuration. */
const exitWith = (code: number, message: string): Effect.Effect<void> =>
  Effect.sync(() => {
    process.stderr.write(`pinboard: ${message}\n`)
    process.exit(code)
  })

const program = Effect.gen(function* () {
  const parsed = parseCommandLine(process.argv.slice(2))
  if (Result.isFailure(parsed)) {
    const { usageText } = yield* Effect.promise(() => import("./Help.js"))
    return yield* exitWith(2, `${parsed.failure.message}\n\n${usageText}\n\nRun \`pinboard --help\` for every option.`)
  }
  const command = parsed.success
  switch (command._tag) {
    case "Help":
    case "Version": {
      const { packageVersion } = yield* Effect.promise(() => import("./Version.js"))
      if (command._tag === "Version") return yield* Console.log(packageVersion())
      const { helpText } = yield* Effect.promise(() => import("./Help.js"))
      return yield* Console.log(helpText(packageVersion()))
    }
    case "Inspect": {
      const { inspect } = yield* Effect.promise(() => import("../inspect/Inspect.js"))
      return yield* inspect(command.argv, process.env)
    }
    case "Config": {
      const { configText } = yield* Effect.promise(() => import("./ShowConfig.js"))
      const loaded = yield* loadConfigWithSources({ flags: command.flags, env: process.env })
      return yield* Console.log(configText(loaded))
    }
    case "Serve": {
      const { appLayer } = yield* Effect.promise(() => import("../App.js"))
      const config = yield* loadConfig({ flags: command.flags, env: process.env })
      // Launched until SIGTERM or SIGINT interrupts it; the last line once everything is released.
      return yield* Layer.launch(appLayer(config)).pipe(
        Effect.onInterrupt(() => Effect.logInfo("pinboard stopped")),
        Effect.provide(logLayer(config.log.level)),
        Effect.catchDefect((defect) => (defect instanceof ListenFailed ? exitWith(1, defect.message) : Effect.die(defect)))
      )
    }
  }
}).pipe(Effect.catchTag("ConfigInvalid", (error) => exitWith(2, `invalid configuration: ${error.message}`)))

/** SIGTERM or SIGINT interrupts the program: once drained, that is a clean stop, exit code 0 (not Effect's 130). */
const teardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)

NodeRuntime.runMain(program, { teardown })
