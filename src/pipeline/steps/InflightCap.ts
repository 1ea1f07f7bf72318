// Step 8, inflight cap (DESIGN 9): forwards to one worker awaiting headers, per Pinboard
// process, at most `forwards.maxInflight`.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../../AppConfig.js"
import { WorkerAtCapacity } from "../../Errors.js"

export interface InflightCapService {
  /** Takes a slot for the worker, or refuses; the caller gives it back with `release`. */
  readonly acquire: (worker: string) => Effect.Effect<void, WorkerAtCapacity>
  readonly release: (worker: string) => void
}

export const makeInflightCap = (maxInflight: number): InflightCapService => {
  const inflight = new Map<string, number>()
  return {
    acquire: (worker) =>
      Effect.suspend(() => {
        const taken = inflight.get(worker) ?? 0
        if (taken >= maxInflight) return new WorkerAtCapacity()
        inflight.set(worker, taken + 1)
        return Effect.void
      }),
    release: (worker) => {
      const taken = inflight.get(worker) ?? 0
      if (taken <= 1) inflight.delete(worker)
      else inflight.set(worker, taken - 1)
    }
  }
}

export class InflightCap extends Context.Tag("pinboard/InflightCap")<InflightCap, InflightCapService>() {
  static readonly layer = Layer.effect(
    InflightCap,
    Effect.map(AppConfig, (config) => makeInflightCap(config.forwards.maxInflight))
  )
}
