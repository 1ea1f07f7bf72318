// The layers, composed in one place: the two listeners over the instance pipeline (deliver,
// the forward's context, the inflight cap), the registry on the backend the config chooses and
// its clock, auth and the registry API's credentials, the upstream client, the forward's timers, the metrics and the traces; each
// reads the config it needs from AppConfig.
import { Layer } from "effect"
import { AppConfig } from "./AppConfig.js"
import { Auth } from "./auth/Auth.js"
import { Credentials } from "./auth/Credentials.js"
import type { PinboardConfig } from "./Config.js"
import { MetricsServer } from "./http/MetricsServer.js"
import { Server } from "./http/Server.js"
import { Metrics } from "./observe/Metrics.js"
import { Tracing } from "./observe/Tracing.js"
import { Deliver } from "./pipeline/Deliver.js"
import { ClientAddress } from "./pipeline/ClientAddress.js"
import { InflightCap } from "./pipeline/InflightCap.js"
import { InstancePipeline } from "./pipeline/Pipeline.js"
import { Deadlines } from "./proxy/Deadlines.js"
import { ForwardContext } from "./proxy/ForwardContext.js"
import { Upstream } from "./proxy/Upstream.js"
import { Backend } from "./registry/Backend.js"
import { Registry } from "./registry/Registry.js"
import { RegistryClock } from "./registry/RegistryClock.js"

export const appLayer = (config: PinboardConfig): Layer.Layer<Server | MetricsServer> =>
  Layer.merge(Server.layer, MetricsServer.layer).pipe(
    Layer.provide(InstancePipeline.layer),
    Layer.provide(Layer.merge(Deliver.layer, ForwardContext.layer)),
    Layer.provideMerge(Layer.mergeAll(InflightCap.layer, ClientAddress.layer, Tracing.layer, Auth.layer, Credentials.layer, Upstream.layer, Deadlines.layer)),
    Layer.provideMerge(Registry.layer),
    Layer.provide(RegistryClock.layer),
    Layer.provideMerge(Backend.layer),
    Layer.provideMerge(Metrics.layer),
    Layer.provide(AppConfig.layer(config))
  )
