// The client Pinboard forwards with: one undici Agent, keep-alive pools per worker origin
// (docs/proxy.md). A Layer, so tests can put a dispatcher of their own in its place and drive
// the timeouts of Forward.ts with a TestClock.
import { Context, Effect, Layer } from "effect"
import { Agent, type Dispatcher } from "undici"
import { CONNECT_TIMEOUT_MS } from "./Limits.js"

export interface UpstreamClient {
  readonly dispatch: (options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) => boolean
}

export class Upstream extends Context.Service<Upstream, UpstreamClient>()("pinboard/Upstream") {
  /** The timeouts that matter are Forward.ts's own (Clock-driven); undici's are off or a backstop. */
  static readonly layer = Layer.effect(
    Upstream,
    Effect.acquireRelease(
      Effect.sync(
        () =>
          new Agent({
            connect: { timeout: CONNECT_TIMEOUT_MS },
            headersTimeout: 0,
            bodyTimeout: 0,
            pipelining: 1,
            // HTTP/1.1 to workers, as undici 7 spoke by default: undici 8 would take h2 from an
            // https worker's ALPN, and a WebSocket upgrade or a trailer needs HTTP/1.1.
            allowH2: false
          })
      ),
      (agent) => Effect.promise(() => agent.destroy())
    )
  )

  static readonly layerTest = (client: UpstreamClient) => Layer.succeed(Upstream, client)
}
