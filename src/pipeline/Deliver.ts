// Resolve, inflight cap and forward, with the retries of docs/proxy.md "Retries"
// and the in-band refusal (docs/proxy.md "Retries"), applied as the Schedules of Policies.ts. The same for HTTP
// and WebSocket upgrades: each brings a Transport that sends to a placement and, once the
// worker's headers are in, finishes.
import { Data, Effect } from "effect"
import {
  BadGateway,
  type ClientAborted,
  type UpstreamTimeout,
  type WorkerAtCapacity,
  WorkerRefusedActivation
} from "../Errors.js"
import type { TracingService } from "../observe/Tracing.js"
import type { SendError } from "../proxy/Exchange.js"
import type { StaleResolve } from "../proxy/Signals.js"
import type { Placement, RegistryService, ResolveRequest } from "../registry/Registry.js"
import { MAX_RE_RESOLVES, RE_RESOLVE, RE_RESOLVE_AFTER_MS, REFUSAL_RE_PLACE, retryAfterFailure } from "./Policies.js"
import type { InflightCapService } from "./steps/InflightCap.js"
import { afterStep } from "./steps/AfterStep.js"
import { resolvePlacement, type ResolveError } from "./steps/Resolve.js"

export interface Transport<Sent> {
  /** Requests without a body and upgrades may be re-placed after a refusal: nothing is replayed. */
  readonly canRePlace: boolean
  /**
   * Sends to the placement unless the clock is past `sendBy`; succeeds once the worker's
   * headers are in. Calls `settled` once when they are, or when the send has ended without them.
   * `traceparent`, when the request is traced, names the forward's span to the worker.
   */
  readonly send: (placement: Placement, sendBy: number, settled: () => void, traceparent: string | undefined) => Effect.Effect<Sent, SendError>
  /** What follows the headers (the tunnel); none: the exchange goes on by itself. */
  readonly finish?: (sent: Sent) => Effect.Effect<void>
}

export type DeliverError = ResolveError | WorkerAtCapacity | WorkerRefusedActivation | BadGateway | UpstreamTimeout | ClientAborted

/** A refusal, once the placement is released and the worker's nack counted. */
class RefusedBy extends Data.TaggedError("RefusedBy")<{ readonly worker: string }> {}

/** StaleResolve never outlasts RE_RESOLVE: the last resolve it allows is sent without the stale check. */
type AttemptError = DeliverError | StaleResolve | RefusedBy

/** The placement's env: in hostname-aware mode the registry finds it from the pair's binding. */
const release = (registry: RegistryService, request: ResolveRequest, placement: Placement) =>
  Effect.ignore(registry.release({ env: placement.env, namespace: request.namespace, id: request.id }, placement.epoch))

/** Succeeds with what `finish` gave, or with the exchange when there is no `finish`. */
export type Deliver = <Sent>(request: ResolveRequest, transport: Transport<Sent>) => Effect.Effect<unknown, DeliverError>

type Send = <Sent>(transport: Transport<Sent>, placement: Placement, sendBy: number, settled: () => void) => Effect.Effect<Sent, SendError>

/** Made once per process: `now` is the Clock's time; with `tracing`, resolves and sends are spans. */
export const makeDeliver = (registry: RegistryService, cap: InflightCapService, now: () => number, tracing: TracingService | undefined): Deliver => {
  const resolve: (asked: ResolveRequest) => Effect.Effect<Placement, ResolveError> =
    tracing === undefined ? (asked) => resolvePlacement(registry, asked) : (asked) => tracing.resolve(resolvePlacement(registry, asked))
  const send: Send =
    tracing === undefined
      ? (transport, placement, sendBy, settled) => transport.send(placement, sendBy, settled, undefined)
      : (transport, placement, sendBy, settled) =>
          tracing.forward(placement, (traceparent) => transport.send(placement, sendBy, settled, traceparent))

  return <Sent>(request: ResolveRequest, transport: Transport<Sent>) => {
    /** The worker that refused the first placement, which the re-place excludes. */
    let refusedBy: string | undefined

    // One resolve, inflight cap and send; `last`: sent however long after its resolve. Built
    // as it is run, so `resolvedAt` is when the resolve is asked.
    const attempt = (asked: ResolveRequest, last: boolean): Effect.Effect<Sent, AttemptError> => {
      const resolvedAt = now()
      return Effect.flatMap(resolve(asked), (placement) => {
        const worker = placement.worker
        const sent = afterStep(cap.take(worker), () =>
          send(transport, placement, last ? Infinity : resolvedAt + RE_RESOLVE_AFTER_MS, () => cap.release(worker))
        )
        return Effect.catchAll(sent, (error): Effect.Effect<never, AttemptError> => {
          switch (error._tag) {
            // Releasing a new placement whose worker cannot be reached lets the client's retry re-place.
            case "ConnectFailed":
              return Effect.zipRight(placement.isNew ? release(registry, request, placement) : Effect.void, new BadGateway({ reason: error.reason, cause: error.cause }))
            case "Refused":
              refusedBy = worker
              return Effect.zipRight(
                Effect.zipRight(release(registry, request, placement), Effect.ignore(registry.nack(worker))),
                new RefusedBy({ worker })
              )
            default:
              return Effect.fail(error)
          }
        })
      })
    }

    // A stale send resolves again (RE_RESOLVE); the last resolve it allows is sent as is.
    const placeAndSend = (asked: ResolveRequest): Effect.Effect<Sent, AttemptError> => {
      let resolves = 1
      return retryAfterFailure(attempt(asked, false), RE_RESOLVE, () => attempt(asked, ++resolves > MAX_RE_RESOLVES))
    }

    // After a refusal, one re-place on another worker (REFUSAL_RE_PLACE); a second refusal,
    // or no other worker, is the client's to retry.
    const first = placeAndSend(request)
    const placed = transport.canRePlace
      ? retryAfterFailure(first, REFUSAL_RE_PLACE, () => placeAndSend({ ...request, excluded: [refusedBy!] }))
      : first
    const answered = Effect.catchIf(
      placed,
      (error) => error._tag === "RefusedBy" || (error._tag === "NoLiveBackends" && refusedBy !== undefined),
      () => new WorkerRefusedActivation()
    )
    // RefusedBy is answered above and StaleResolve never outlasts RE_RESOLVE (see AttemptError).
    const delivered = answered as Effect.Effect<Sent, DeliverError>
    return transport.finish === undefined ? delivered : Effect.flatMap(delivered, transport.finish)
  }
}
