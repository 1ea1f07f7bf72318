// Step 8, inflight cap (DESIGN 9): forwards to one worker awaiting headers, per Pinboard
// process, at most `forwards.maxInflight`. The forward gives its slot back itself, the
// moment the worker's headers are in or the exchange ends (no Effect finalizer per request).
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../../AppConfig.js"

export interface InflightCapService {
  /** Takes a slot for the worker; false when all are taken. The taker gives it back with `release`. */
  readonly tryAcquire: (worker: string) => boolean
  readonly release: (worker: string) => void
  /** Slots taken now, per worker (for the metrics). */
  readonly snapshot: () => Iterable<readonly [string, number]>
}

export const makeInflightCap = (maxInflight: number): InflightCapService => {
  const inflight = new Map<string, number>()
  return {
    tryAcquire: (worker) => {
      const taken = inflight.get(worker) ?? 0
      if (taken >= maxInflight) return false
      inflight.set(worker, taken + 1)
      return true
    },
    release: (worker) => {
      const taken = inflight.get(worker) ?? 0
      if (taken <= 1) inflight.delete(worker)
      else inflight.set(worker, taken - 1)
    },
    snapshot: () => inflight.entries()
  }
}

export class InflightCap extends Context.Tag("pinboard/InflightCap")<InflightCap, InflightCapService>() {
  static readonly layer = Layer.effect(
    InflightCap,
    Effect.map(AppConfig, (config) => makeInflightCap(config.forwards.maxInflight))
  )
}
