// The backend the registry runs on, as a service: the embedded registry (Memory.ts) or Redis
// (Redis.ts, its client acquired and released in the layer's scope), as the config says:
// one server, a Cluster or Sentinels.
import { Context, Effect, Layer, Result } from "effect"
import { AppConfig } from "../AppConfig.js"
import { type PinboardConfig, usesEmbeddedRegistry } from "../Config.js"
import { readRedisFiles } from "../config/RedisFiles.js"
import { Metrics } from "../observe/Metrics.js"
import { embeddedBackend } from "./Memory.js"
import { policyOf } from "./Policy.js"
import { redisBackend } from "./Redis.js"
import { redisTargetOf } from "./RedisTarget.js"
import type { RegistryBackend } from "./RegistryBackend.js"

/** The files were read once when the configuration was loaded; one gone since is a defect of the start. */
const redisFiles = (config: PinboardConfig) =>
  Result.match(readRedisFiles(config.redis), {
    onFailure: (problem) => Effect.die(new Error(`redis.${problem.field}: ${problem.message}`)),
    onSuccess: Effect.succeed
  })

export class Backend extends Context.Service<Backend, RegistryBackend>()("pinboard/RegistryBackend") {
  /** Redis when a URL, Cluster seeds or Sentinels are given; else the embedded registry. */
  static readonly layer: Layer.Layer<Backend, never, AppConfig | Metrics> = Layer.effect(
    Backend,
    Effect.flatMap(AppConfig, (config) =>
      usesEmbeddedRegistry(config)
        ? embeddedBackend(config.buckets, policyOf(config))
        : Effect.all([Metrics, redisFiles(config)]).pipe(
            Effect.flatMap(([metrics, files]) =>
              redisBackend(
                { target: redisTargetOf(config.redis, files), prefix: config.redis.prefix, buckets: config.buckets, policy: policyOf(config) },
                metrics
              )
            )
          )
    )
  )

  static readonly layerTest = (backend: RegistryBackend): Layer.Layer<Backend> => Layer.succeed(Backend, backend)
}
