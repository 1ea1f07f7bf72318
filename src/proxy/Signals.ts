// What a forward tells the delivery step besides a catalogue error: these never reach a
// client as such; Deliver turns each into the retry or the catalogue row docs/errors.md names.
import { Data } from "effect"

/** The TCP connection to the worker failed or timed out: nothing was sent. `reason`: GatewayFailure.ts. */
export class ConnectFailed extends Data.TaggedError("ConnectFailed")<{ readonly reason: string; readonly cause: unknown }> {}

/** The worker answered `503` with `Pinned-Refusal: lease-unhealthy`; its answer was dropped. */
export class Refused extends Data.TaggedError("Refused")<{}> {}

/** More than RE_RESOLVE_AFTER_MS passed between resolve and send; nothing was sent. */
export class StaleResolve extends Data.TaggedError("StaleResolve")<{}> {}
