// The worker library's Promise API: `startWorker` runs `makeWorker` (Worker.ts) in a scope of
// its own and gives the worker back with Promise functions made from the context it runs in.
// The only place in the library that runs an Effect.
import { Effect, Exit, Scope } from "effect"
import { makeWorker, type RunningWorker, type WorkerOptions } from "./Worker.js"

/** A running worker, as `startWorker` gives it. */
export interface PinboardWorker extends Omit<RunningWorker, "registered"> {
  /** Resolves once the worker has registered with Pinboard (it keeps retrying until then). */
  readonly registered: () => Promise<void>
  /** Drains, waits for requests in progress, deactivates everything, deregisters, closes. */
  readonly stop: () => Promise<void>
}

/** Starts a worker: listens, registers with Pinboard, and serves until `stop()` or SIGTERM/SIGINT. */
export const startWorker = (options: WorkerOptions): Promise<PinboardWorker> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const { registered, ...worker } = yield* Scope.provide(makeWorker(options), scope).pipe(
        Effect.onError(() => Scope.close(scope, Exit.void))
      )
      const runPromise = Effect.runPromiseWith(yield* Effect.context<never>())
      let stopped: Promise<void> | undefined
      const stop = () => (stopped ??= runPromise(Scope.close(scope, Exit.void)))
      // `on`, not `once`: a runner in front (npx, tsx) passes a terminal's Ctrl-C on to the
      // process that got it already, and a second signal must not cut the first one's stop.
      for (const signal of options.stopOnSignals ?? ["SIGTERM", "SIGINT"]) {
        process.on(signal, () => void stop().then(() => process.exit(0)))
      }
      return { ...worker, registered: () => runPromise(registered), stop }
    })
  )
