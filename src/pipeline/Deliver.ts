// Resolve, inflight cap and forward (docs/proxy.md "Check order"), with the retries of
// docs/proxy.md "Retries": the 5 s re-resolve and the re-place after an in-band refusal,
// applied as the Schedules of Policies.ts. The same for HTTP and WebSocket upgrades: each
// brings a Transport that sends to a placement and, once the worker's headers are in, finishes.
import { Clock, Context, Data, Effect, Layer } from "effect"
import {
  BadGateway,
  type ClientAborted,
  type NoLiveBackends,
  type UpstreamTimeout,
  type WorkerAtCapacity,
  WorkerRefusedActivation
} from "../Errors.js"
import { Metrics, type MetricsService } from "../observe/Metrics.js"
import { Tracing, type TracingService } from "../observe/Tracing.js"
import type { SendError } from "../proxy/Exchange.js"
import type { StaleResolve } from "../proxy/Signals.js"
import { Registry, type Placement, type RegistryService, type ResolveRequest } from "../registry/Registry.js"
import { monotonicMillis } from "../serving/Monotonic.js"
import { InflightCap, type InflightCapService } from "./InflightCap.js"
import { RE_RESOLVE, RE_RESOLVE_AFTER_MS, REFUSAL_RE_PLACE, retryAfterFailure } from "./Policies.js"
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

/** A send that may be reported stale, and a refusal not yet answered. */
type AttemptError = Exclude<DeliverError, WorkerRefusedActivation> | StaleResolve | RefusedBy

/** Succeeds with what `finish` gave, or with the exchange when there is no `finish`. */
export type DeliverService = <Sent>(request: ResolveRequest, transport: Transport<Sent>) => Effect.Effect<unknown, DeliverError>

export class Deliver extends Context.Service<Deliver, DeliverService>()("pinboard/Deliver") {
  /** Resolves and sends are spans when traces are on (observe/Tracing.ts). */
  static readonly layer: Layer.Layer<Deliver, never, Registry | InflightCap | Tracing | Metrics> = Layer.effect(
    Deliver,
    Effect.gen(function* () {
      const clock = yield* Clock.Clock
      return makeDeliver(yield* Registry, yield* InflightCap, () => monotonicMillis(clock), yield* Tracing, yield* Metrics)
    })
  )
}

/** The placement's env: in hostname-aware mode the registry finds it from the pair's binding. */
const release = (registry: RegistryService, request: ResolveRequest, placement: Placement) =>
  Effect.ignore(registry.release({ env: placement.env, namespace: request.namespace, id: request.id }, placement.epoch))

/** A send without a deadline is never stale: if it said so, that is a defect, not an answer. */
const neverStale = (): Effect.Effect<never> => Effect.die(new Error("a send without a deadline was reported stale"))

const makeDeliver = (
  registry: RegistryService,
  cap: InflightCapService,
  now: () => number,
  tracing: TracingService,
  metrics: MetricsService
): DeliverService => {
  const resolve = (asked: ResolveRequest) => tracing.resolve(resolvePlacement(registry, asked))

  return <Sent>(request: ResolveRequest, transport: Transport<Sent>) => {
    /** The worker that refused the first placement, which the re-place excludes. */
    let refusedBy: string | undefined

    // One resolve, inflight cap and send, stale `staleAfterMs` after the resolve was asked
    // (Infinity: sent however late). Built as it is run, so `resolvedAt` is when it is asked.
    const attempt = (asked: ResolveRequest, staleAfterMs: number): Effect.Effect<Sent, AttemptError> => {
      const resolvedAt = now()
      return Effect.flatMap(resolve(asked), (placement) => {
        const worker = placement.worker
        const sent = afterStep(cap.take(worker), () =>
          tracing.forward(placement, (traceparent) => transport.send(placement, resolvedAt + staleAfterMs, () => cap.release(worker), traceparent))
        )
        return Effect.catch(sent, (error): Effect.Effect<never, AttemptError> => {
          switch (error._tag) {
            // Releasing a new placement whose worker cannot be reached lets the client's retry re-place.
            case "ConnectFailed":
              return Effect.andThen(placement.isNew ? release(registry, request, placement) : Effect.void, new BadGateway({ reason: error.reason, cause: error.cause }))
            case "Refused":
              refusedBy = worker
              metrics.refusal()
              return Effect.andThen(
                Effect.andThen(release(registry, request, placement), Effect.ignore(registry.nack(worker))),
                new RefusedBy({ worker })
              )
            default:
              return Effect.fail(error)
          }
        })
      })
    }

    // A stale send resolves again (RE_RESOLVE); once those are spent, the last resolve is sent
    // as is, by a step whose type has no StaleResolve.
    const placeAndSend = (asked: ResolveRequest): Effect.Effect<Sent, Exclude<AttemptError, StaleResolve>> => {
      const checked = () => attempt(asked, RE_RESOLVE_AFTER_MS)
      return Effect.catchTag(retryAfterFailure(checked(), RE_RESOLVE, checked), "StaleResolve", () =>
        Effect.catchTag(attempt(asked, Infinity), "StaleResolve", neverStale)
      )
    }

    // After a refusal, one re-place on another worker (REFUSAL_RE_PLACE); a second refusal,
    // or no other worker, is the client's to retry.
    const first = placeAndSend(request)
    const placed = transport.canRePlace
      ? retryAfterFailure(first, REFUSAL_RE_PLACE, () => placeAndSend({ ...request, excluded: [refusedBy!] }))
      : first
    const delivered: Effect.Effect<Sent, DeliverError> = Effect.catchTags(placed, {
      RefusedBy: () => new WorkerRefusedActivation(),
      NoLiveBackends: (error: NoLiveBackends) => (refusedBy === undefined ? Effect.fail(error) : new WorkerRefusedActivation())
    })
    return transport.finish === undefined ? delivered : Effect.flatMap(delivered, transport.finish)
  }
}
