// The layers, composed in one place: the server over the registry chosen by the config,
// auth, the upstream client, the forward's timers and the inflight cap; the metrics and
// their listener, and the JSON logger, as the config asks.
import { Layer } from "effect"
import { AppConfig } from "./AppConfig.js"
import { Auth } from "./auth/Auth.js"
import type { PinboardConfig } from "./Config.js"
import { ServerLive } from "./http/Server.js"
import { metricsLayer } from "./observe/Metrics.js"
import { MetricsServerLive } from "./observe/MetricsServer.js"
import { InflightCap } from "./pipeline/steps/InflightCap.js"
import { Deadlines } from "./proxy/Deadlines.js"
import { Upstream } from "./proxy/Upstream.js"
import * as Registry from "./registry/Registry.js"

export const appLayer = (config: PinboardConfig): Layer.Layer<never> => {
  const configLayer = Layer.succeed(AppConfig, config)
  const metrics = metricsLayer(config.metrics.port !== undefined)
  return Layer.merge(ServerLive, MetricsServerLive).pipe(
    Layer.provide(Registry.layer(config)),
    Layer.provide(Upstream.layer),
    Layer.provide(Deadlines.layer),
    Layer.provide(InflightCap.layer.pipe(Layer.provide(configLayer))),
    Layer.provide(Auth.layer.pipe(Layer.provide(configLayer))),
    Layer.provide(metrics),
    Layer.provide(configLayer)
  )
}
