// `/healthz` and `/readyz` (docs/proxy.md).
import { Effect } from "effect"
import { NotReady } from "../Errors.js"
import { Registry } from "../registry/Registry.js"

const REGISTRY_ANSWER_WITHIN_MS = 1000
const MAX_CLOCK_SKEW_MS = 1000

export const healthz = Effect.succeed({ status: "ok" })

/** Ready when not shutting down, the registry answers within 1 s and its clock is within 1 s of ours. */
export const readyz = (shuttingDown: () => boolean) =>
  Effect.gen(function* () {
    if (shuttingDown()) return yield* new NotReady({ reason: "shutting down" })
    const registry = yield* Registry
    const skew = yield* registry.clockSkewMs.pipe(
      Effect.timeoutFail({ duration: REGISTRY_ANSWER_WITHIN_MS, onTimeout: () => new NotReady({ reason: "registry slow" }) }),
      Effect.catchTag("RegistryUnavailable", () => new NotReady({ reason: "registry unavailable" }))
    )
    if (Math.abs(skew) > MAX_CLOCK_SKEW_MS) return yield* new NotReady({ reason: "clock skew with the registry" })
    return { status: "ready" }
  })
