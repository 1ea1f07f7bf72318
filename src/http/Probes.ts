// `/healthz` and `/readyz` (docs/proxy.md).
import { Effect } from "effect"
import { NotReady } from "../Errors.js"
import { Registry } from "../registry/Registry.js"

const REGISTRY_ANSWER_WITHIN_MS = 1000

export const healthz = Effect.succeed({ status: "ok" })

/**
 * Ready when not shutting down, the registry answers within 1 s, and this process can tell the
 * registry's time within `registry.maxClockOffsetMs` (else it makes no registry writes).
 */
export const readyz = (shuttingDown: () => boolean) =>
  Effect.gen(function* () {
    if (shuttingDown()) return yield* new NotReady({ reason: "shutting down" })
    const registry = yield* Registry
    yield* registry.ping.pipe(
      Effect.timeoutOrElse({ duration: REGISTRY_ANSWER_WITHIN_MS, orElse: () => Effect.fail(new NotReady({ reason: "registry slow" })) }),
      Effect.catchTag("RegistryUnavailable", (error) =>
        new NotReady({ reason: error.reason === undefined ? "registry unavailable" : `registry unavailable: ${error.reason}` })
      )
    )
    const clock = yield* registry.clockReading
    if (clock._tag === "Unsampled") return yield* new NotReady({ reason: "registry time not sampled" })
    if (clock._tag === "OutOfBound") {
      return yield* new NotReady({ reason: `clock offset from the registry ${Math.round(clock.offsetMs)} ms, past registry.maxClockOffsetMs` })
    }
    return { status: "ready" }
  })
