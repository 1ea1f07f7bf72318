// The backend the registry runs on, as a service: the embedded registry (Memory.ts) or Redis
// (Redis.ts, its client acquired and released in the layer's scope), as the config says.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../AppConfig.js"
import { usesEmbeddedRegistry } from "../Config.js"
import { Metrics } from "../observe/Metrics.js"
import { embeddedBackend } from "./Memory.js"
import { policyOf } from "./Policy.js"
import { redisBackend } from "./Redis.js"
import type { RegistryBackend } from "./RegistryBackend.js"

export class Backend extends Context.Tag("pinboard/RegistryBackend")<Backend, RegistryBackend>() {
  /** Redis when a URL or Cluster seeds are given; else the embedded registry. */
  static readonly layer: Layer.Layer<Backend, never, AppConfig | Metrics> = Layer.scoped(
    Backend,
    Effect.flatMap(AppConfig, (config) =>
      usesEmbeddedRegistry(config)
        ? embeddedBackend(config.buckets, policyOf(config))
        : Effect.flatMap(Metrics, (metrics) =>
            redisBackend({ target: config.redis, prefix: config.redis.prefix, buckets: config.buckets, policy: policyOf(config) }, metrics)
          )
    )
  )

  static readonly layerTest = (backend: RegistryBackend): Layer.Layer<Backend> => Layer.succeed(Backend, backend)
}
