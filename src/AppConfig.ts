import { Context, Layer } from "effect"
import type { PinboardConfig } from "./Config.js"

/** The validated configuration, for the services and handlers that read it. */
export class AppConfig extends Context.Tag("pinboard/Config")<AppConfig, PinboardConfig>() {
  static readonly layer = (config: PinboardConfig): Layer.Layer<AppConfig> => Layer.succeed(AppConfig, config)
}
