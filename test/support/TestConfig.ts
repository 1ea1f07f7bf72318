// The configuration other modules' tests start from: every default, token "test-token".
import { Schema } from "effect"
import { type PinboardConfig, PinboardConfigSchema } from "../../src/Config.js"

/**
 * Defaults with token "test-token", shallow overrides. Overriding `leaseMs`
 * without `nack` moves `nack.windowMs` along, as the real default does.
 */
export const configForTests = (overrides: Partial<PinboardConfig> = {}): PinboardConfig => {
  const defaults = Schema.decodeUnknownSync(PinboardConfigSchema)({ token: "test-token" })
  const config = { ...defaults, ...overrides }
  return overrides.leaseMs !== undefined && overrides.nack === undefined
    ? { ...config, nack: { ...config.nack, windowMs: overrides.leaseMs } }
    : config
}

/** The `redis` section with every default and these fields, as the file would give them. */
export const redisSection = (fields: Record<string, unknown>): PinboardConfig["redis"] =>
  Schema.decodeUnknownSync(PinboardConfigSchema)({ token: "test-token", redis: fields }).redis
