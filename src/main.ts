#!/usr/bin/env node
// Pinboard: parse the config, build the layers, run until SIGTERM (DESIGN 1, 2, 9); or, as
// `pinboard inspect`, read the registry API (docs/inspect.md). Each loads only its own modules.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer } from "effect"
import { loadConfig } from "./Config.js"
import { logLayer } from "./observe/Log.js"

const program = Effect.gen(function* () {
  if (process.argv[2] === "inspect") {
    const { inspect } = yield* Effect.promise(() => import("./inspect/Inspect.js"))
    return yield* inspect(process.argv.slice(3), process.env)
  }
  const { appLayer } = yield* Effect.promise(() => import("./App.js"))
  const config = yield* loadConfig({ argv: process.argv.slice(2), env: process.env }).pipe(
    Effect.catchTag("ConfigInvalid", (error) =>
      Effect.sync(() => {
        process.stderr.write(`pinboard: invalid configuration: ${error.message}\n`)
        process.exit(2)
      })
    )
  )
  // Launched until SIGTERM or SIGINT interrupts it; the last line once everything is released.
  yield* Layer.launch(appLayer(config)).pipe(
    Effect.onInterrupt(() => Effect.logInfo("pinboard stopped")),
    Effect.provide(logLayer(config.log.level))
  )
})

NodeRuntime.runMain(program, { disablePrettyLogger: true })
