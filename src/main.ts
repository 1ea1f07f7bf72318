#!/usr/bin/env node
// Pinboard: parse the config, build the layers, run until SIGTERM (DESIGN 1, 2, 9).
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { AppConfig } from "./AppConfig.js"
import { loadConfig } from "./Config.js"
import { ServerLive } from "./http/Server.js"
import * as Registry from "./registry/Registry.js"

const program = Effect.gen(function* () {
  const config = yield* loadConfig({ argv: process.argv.slice(2), env: process.env }).pipe(
    Effect.catchTag("ConfigInvalid", (error) =>
      Effect.sync(() => {
        process.stderr.write(`pinboard: invalid configuration: ${error.message}\n`)
        process.exit(2)
      })
    )
  )
  yield* Layer.launch(ServerLive.pipe(Layer.provide(Registry.layer(config)), Layer.provide(Layer.succeed(AppConfig, config))))
})

NodeRuntime.runMain(program)
