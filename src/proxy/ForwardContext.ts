// What every exchange with a worker shares (Forward.ts, Tunnel.ts), made once per process: the
// upstream client, the timers, the monotonic clock and the limits of docs/proxy.md "Limits".
import { Clock, Context, Effect, Layer } from "effect"
import { AppConfig } from "../AppConfig.js"
import { monotonicMillis } from "../serving/Monotonic.js"
import { Deadlines, type DeadlinesService } from "./Deadlines.js"
import { forwardLimits, type ForwardLimits } from "./Limits.js"
import { Upstream, type UpstreamClient } from "./Upstream.js"

export interface ForwardContextService {
  readonly upstream: UpstreamClient
  readonly deadlines: DeadlinesService
  /** The Clock's monotonic time, so a TestClock drives the stale check and a wall clock step does not. */
  readonly now: () => number
  readonly limits: ForwardLimits
}

export class ForwardContext extends Context.Service<ForwardContext, ForwardContextService>()("pinboard/ForwardContext") {
  static readonly layer: Layer.Layer<ForwardContext, never, Upstream | Deadlines | AppConfig> = Layer.effect(
    ForwardContext,
    Effect.gen(function* () {
      const clock = yield* Clock.Clock
      return {
        upstream: yield* Upstream,
        deadlines: yield* Deadlines,
        now: () => monotonicMillis(clock),
        limits: forwardLimits((yield* AppConfig).forwards.timeoutMs)
      }
    })
  )
}
