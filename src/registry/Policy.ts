// The registry's policy from the configuration (docs/config.md, docs/protocol.md "Resolution"): lease, balance factor, nacks;
// and the shape of each env's takeover in hostname-aware mode (Config.ts `takeoverOf`).
import type { PinboardConfig, Takeover } from "../Config.js"
import type { RegistryPolicy } from "./Domain.js"

export const policyOf = (config: PinboardConfig): RegistryPolicy => ({
  leaseMs: config.leaseMs,
  balanceFactor: config.balanceFactor,
  nackThreshold: config.nack.threshold,
  nackWindowMs: config.nack.windowMs
})

/** Each env's takeover in hostname-aware mode (docs/proxy.md "Hostname-aware mode", `envs.<env>.takeover`). */
export type TakeoverOf = (env: string) => Takeover
