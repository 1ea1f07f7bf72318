// A graceful stop for a node:http server (docs/proxy.md "Shutdown", docs/worker.md): stop
// accepting, close the idle connections, and give the exchanges in flight a grace period.
// Pinboard's data-plane server and the worker library's server stop alike.
import type { Server, ServerResponse } from "node:http"
import { Duration, Effect } from "effect"

export interface InFlight {
  /** Counts `res`'s exchange until its response closes. */
  readonly track: (res: ServerResponse) => void
  /** Stops the servers accepting, closes their idle connections, and waits up to `grace` for the exchanges in flight. */
  readonly drain: (servers: ReadonlyArray<Server>, grace: Duration.Input) => Effect.Effect<void>
}

export const makeInFlight = (): InFlight => {
  let count = 0
  let drained: (() => void) | undefined
  // One listener for every response: a request pays for no closure of its own.
  const over = () => {
    if (--count === 0) drained?.()
  }
  const allOver = Effect.callback<void>((resume) => {
    if (count === 0) return resume(Effect.void)
    drained = () => resume(Effect.void)
  })
  return {
    track: (res) => {
      count++
      res.on("close", over)
    },
    drain: (servers, grace) =>
      Effect.suspend(() => {
        for (const server of servers) {
          server.close()
          server.closeIdleConnections()
        }
        // Stops run in finalizers, uninterruptibly: the wait must be interruptible for the grace to end it.
        return Effect.timeout(Effect.interruptible(allOver), grace).pipe(Effect.ignore)
      })
  }
}
