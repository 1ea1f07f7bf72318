// The layers, composed in one place: the two listeners over the registry (on the backend the
// config chooses, and its clock), auth, the upstream client, the forward's timers, the inflight cap, the
// metrics and the traces, every one of them reading the config it needs from AppConfig.
import { Layer } from "effect"
import { AppConfig } from "./AppConfig.js"
import { Auth } from "./auth/Auth.js"
import type { PinboardConfig } from "./Config.js"
import { MetricsServer } from "./http/MetricsServer.js"
import { Server } from "./http/Server.js"
import { Metrics } from "./observe/Metrics.js"
import { Tracing } from "./observe/Tracing.js"
import { InflightCap } from "./pipeline/steps/InflightCap.js"
import { Deadlines } from "./proxy/Deadlines.js"
import { Upstream } from "./proxy/Upstream.js"
import * as MemoryBackend from "./registry/Memory.js"
import * as RedisBackend from "./registry/Redis.js"
import { Registry } from "./registry/Registry.js"
import { RegistryClock } from "./registry/RegistryClock.js"

const isEmbedded = (config: PinboardConfig) => config.redis.url === undefined && config.redis.cluster === undefined

/** Redis when a URL or Cluster seeds are given; else the embedded registry. */
export const backendOf = (config: PinboardConfig) => (isEmbedded(config) ? MemoryBackend.layerConfig : RedisBackend.layerConfig)

/** Redis time sampled on Redis; the process's own clock for the embedded registry, which lives in it. */
const registryClockOf = (config: PinboardConfig) => (isEmbedded(config) ? RegistryClock.layerLocal : RegistryClock.layerSampledConfig)

export const appLayer = (config: PinboardConfig): Layer.Layer<Server | MetricsServer> =>
  Layer.merge(Server.layerConfig, MetricsServer.layerConfig).pipe(
    Layer.provide(Registry.layerConfig),
    Layer.provide(registryClockOf(config)),
    Layer.provide(backendOf(config)),
    Layer.provideMerge(Metrics.layerConfig),
    Layer.provide(Layer.mergeAll(Upstream.layer, Deadlines.layer, InflightCap.layerConfig, Auth.layerConfig, Tracing.layerConfig)),
    Layer.provide(Layer.succeed(AppConfig, config))
  )
