import { Context, Layer } from "effect"
import type { PinboardConfig } from "./Config.js"

/** The validated configuration, for the services and handlers that read it. */
export class AppConfig extends Context.Service<AppConfig, PinboardConfig>()("pinboard/Config") {
  static readonly layer = (config: PinboardConfig): Layer.Layer<AppConfig> => Layer.succeed(AppConfig, config)
}
