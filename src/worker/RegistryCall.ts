// One registry call as the worker's fibers make it: whatever a client (the author's own, maybe)
// throws becomes a RegistryCallFailed, unless it is one already or a refusal; and how its
// failure is logged: a call that got no answer is a warning, one Pinboard refused (401, 403:
// the credential does not cover it, which only its owner can fix) an error with Pinboard's text.
import { Duration, Effect, Schedule } from "effect"
import { RegistryCallFailed, RegistryCallRefused } from "./RegistryClient.js"

/** Retries of the registry calls the worker needs (register, heartbeat, the first keys): quick at first, then every 2 s at most. */
export const REGISTRY_RETRY = Schedule.min([Schedule.exponential(Duration.millis(100), 2), Schedule.spaced(Duration.seconds(2))])

export type RegistryCallError = RegistryCallFailed | RegistryCallRefused

export const registryCall = <A>(what: string, call: () => Promise<A>): Effect.Effect<A, RegistryCallError> =>
  Effect.tryPromise({
    try: call,
    catch: (error) =>
      error instanceof RegistryCallFailed || error instanceof RegistryCallRefused
        ? error
        : new RegistryCallFailed({ message: `${what}: ${error instanceof Error ? error.message : String(error)}` })
  })

/** `<what> failed<after>` (a warning) or `<what> refused<after>` (an error), with the error's message as `cause`. */
export const logCallError = (what: string, error: RegistryCallError, after = ""): Effect.Effect<void> =>
  (error._tag === "RegistryCallRefused" ? Effect.logError(`${what} refused${after}`) : Effect.logWarning(`${what} failed${after}`)).pipe(
    Effect.annotateLogs({ cause: error.message })
  )
