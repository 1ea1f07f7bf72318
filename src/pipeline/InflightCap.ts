// Step 8, inflight cap (docs/proxy.md): forwards to one worker awaiting headers, per Pinboard
// process, at most `forwards.maxInflight`; one more is `503 worker at capacity, retry`. The
// forward gives its slot back itself, the moment the worker's headers are in or the exchange
// ends (no Effect finalizer per request: bench/effectCosts.ts).
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../AppConfig.js"
import { WorkerAtCapacity } from "../Errors.js"

export interface InflightCapService {
  /** Takes a slot for the worker, or fails when all are taken. The taker gives it back with `release`. */
  readonly take: (worker: string) => Effect.Effect<void, WorkerAtCapacity>
  readonly release: (worker: string) => void
  /** Slots taken now, per worker (for the metrics). */
  readonly snapshot: () => Iterable<readonly [string, number]>
}

export const makeInflightCap = (maxInflight: number): InflightCapService => {
  const inflight = new Map<string, number>()
  return {
    take: (worker) => {
      const taken = inflight.get(worker) ?? 0
      if (taken >= maxInflight) return new WorkerAtCapacity()
      inflight.set(worker, taken + 1)
      return Effect.void
    },
    release: (worker) => {
      const taken = inflight.get(worker) ?? 0
      if (taken <= 1) inflight.delete(worker)
      else inflight.set(worker, taken - 1)
    },
    snapshot: () => inflight.entries()
  }
}

export class InflightCap extends Context.Service<InflightCap, InflightCapService>()("pinboard/InflightCap") {
  static readonly layer: Layer.Layer<InflightCap, never, AppConfig> = Layer.effect(
    InflightCap,
    Effect.map(AppConfig, (config) => makeInflightCap(config.forwards.maxInflight))
  )
}
