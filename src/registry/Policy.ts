// The registry's policy from the configuration (DESIGN 2 and 5): lease, balance factor, nacks,
// and each env's takeover in hostname-aware mode.
import { takeoverOf, type PinboardConfig, type Takeover } from "../Config.js"
import type { RegistryPolicy } from "./Domain.js"

export const policyOf = (config: PinboardConfig): RegistryPolicy => ({
  leaseMs: config.leaseMs,
  balanceFactor: config.balanceFactor,
  nackThreshold: config.nack.threshold,
  nackWindowMs: config.nack.windowMs
})

/** Each env's takeover in hostname-aware mode (DESIGN 8, `envs.<env>.takeover`). */
export type TakeoverOf = (env: string) => Takeover

export const takeoverOfConfig = (config: PinboardConfig): TakeoverOf => (env) => takeoverOf(config, env)
