// The deployment token check of the registry API (docs/registry-api.md), in constant time.
import { createHash, timingSafeEqual } from "node:crypto"
import { Redacted } from "effect"
import type { PinboardConfig } from "../Config.js"

const digest = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest()
const expectedDigests = new WeakMap<PinboardConfig, Buffer>()

/** Hashing both sides gives equal lengths, so the comparison time says nothing about the token. */
export const tokenMatches = (config: PinboardConfig, authorization: string | undefined): boolean => {
  if (authorization === undefined || !authorization.startsWith("Bearer ")) return false
  let expected = expectedDigests.get(config)
  if (expected === undefined) {
    expected = digest(Redacted.value(config.token))
    expectedDigests.set(config, expected)
  }
  return timingSafeEqual(digest(authorization.slice("Bearer ".length)), expected)
}
