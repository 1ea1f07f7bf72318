// Resolve, inflight cap and forward (docs/proxy.md "Check order"), with the retries of
// docs/proxy.md "Retries": the 5 s re-resolve (at most twice) and the one re-place after an
// in-band refusal. The same for HTTP and WebSocket upgrades: each brings a Transport that
// sends to a placement. A delivery never fails: it returns what it came to, the placement it
// was last sent to among it.
import { Cause, Clock, Context, Effect, Layer } from "effect"
import { BadGateway, type ClientAborted, type UpstreamTimeout, type WorkerAtCapacity, WorkerRefusedActivation } from "../Errors.js"
import { Metrics, type MetricsService } from "../observe/Metrics.js"
import { Tracing, type TracingService } from "../observe/Tracing.js"
import type { SendError } from "../proxy/Exchange.js"
import type { StaleResolve } from "../proxy/Signals.js"
import { Registry, type Placement, type RegistryService, type ResolveRequest } from "../registry/Registry.js"
import { monotonicMillis } from "../serving/Monotonic.js"
import { InflightCap, type InflightCapService } from "./InflightCap.js"
import { resolvePlacement, type ResolveError } from "./steps/Resolve.js"

/** More than this between resolve and send: the placement is resolved again. */
const RE_RESOLVE_AFTER_MS = 5_000

export interface Transport<Sent> {
  /** Requests without a body and upgrades may be re-placed after a refusal: nothing is replayed. */
  readonly canRePlace: boolean
  /**
   * Sends to the placement unless the monotonic clock is past `sendBy`; succeeds once the
   * worker's headers are in. `traceparent`, when the request is traced, names the forward's span.
   */
  readonly send: (placement: Placement, sendBy: number, traceparent: string | undefined) => Effect.Effect<Sent, SendError>
}

export type DeliverError = ResolveError | WorkerAtCapacity | WorkerRefusedActivation | BadGateway | UpstreamTimeout | ClientAborted

/** What a delivery came to: the placement last sent to (if one was), and what was sent or why not. */
export type Delivery<Sent> =
  | { readonly placement: Placement; readonly sent: Sent; readonly failure: undefined }
  | { readonly placement: Placement | undefined; readonly sent: undefined; readonly failure: Cause.Cause<DeliverError> }

// The two below never leave this module: plain values, not Errors, so that a failed attempt
// takes no stack trace (an Error's is most of what a refusal costs: docs/proxy.md).

/** A refusal, once the placement is released and the worker's nack counted. */
const REFUSED_BY = { _tag: "RefusedBy" } as const
type RefusedBy = typeof REFUSED_BY

/** Why an attempt did not deliver, before the retries have looked at it. */
type AttemptError = Exclude<DeliverError, WorkerRefusedActivation> | StaleResolve | RefusedBy

/** An attempt that did not deliver: why, and the placement it was sent to, if it got one. */
class Undelivered {
  constructor(
    readonly why: AttemptError,
    readonly placement: Placement | undefined
  ) {}
}

interface Attempted<Sent> {
  readonly placement: Placement
  readonly sent: Sent
}

export type DeliverService = <Sent>(request: ResolveRequest, transport: Transport<Sent>) => Effect.Effect<Delivery<Sent>>

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

const undelivered = (why: AttemptError, placement: Placement | undefined): Effect.Effect<never, Undelivered> => Effect.fail(new Undelivered(why, placement))

const wasRefused = (failure: Undelivered) => failure.why._tag === "RefusedBy"

const wasStale = (failure: Undelivered) => failure.why._tag === "StaleResolve"

const noPlacement = (why: ResolveError) => new Undelivered(why, undefined)

const makeDeliver = (
  registry: RegistryService,
  cap: InflightCapService,
  now: () => number,
  tracing: TracingService,
  metrics: MetricsService
): DeliverService => {
  /** The placement's env: in hostname-aware mode the registry finds it from the pair's binding. */
  const release = (asked: ResolveRequest, placement: Placement) =>
    Effect.ignore(registry.release({ env: placement.env, namespace: asked.namespace, id: asked.id }, placement.epoch))

  /** What a failed send means: releasing a new placement whose worker cannot be reached lets the client's retry re-place. */
  const afterSendFailed = (asked: ResolveRequest, placement: Placement, error: SendError): Effect.Effect<AttemptError> => {
    switch (error._tag) {
      case "ConnectFailed":
        return Effect.as(placement.isNew ? release(asked, placement) : Effect.void, new BadGateway({ reason: error.reason, cause: error.cause }))
      case "Refused":
        metrics.refusal()
        return Effect.as(Effect.andThen(release(asked, placement), Effect.ignore(registry.nack(placement.worker))), REFUSED_BY)
      default:
        return Effect.succeed(error)
    }
  }

  /**
   * One resolve, inflight slot and send, stale `staleAfterMs` after the resolve was asked
   * (Infinity: sent however late). The attempt holds the worker's slot until the send ends.
   */
  const attempt = Effect.fnUntraced(function* <Sent>(asked: ResolveRequest, transport: Transport<Sent>, staleAfterMs: number) {
    const resolvedAt = now()
    const placement = yield* Effect.mapError(tracing.resolve(resolvePlacement(registry, asked)), noPlacement)
    const taken = yield* Effect.result(cap.take(placement.worker))
    if (taken._tag === "Failure") return yield* undelivered(taken.failure, placement)
    const sent = yield* Effect.result(
      Effect.ensuring(
        tracing.forward(placement, (traceparent) => transport.send(placement, resolvedAt + staleAfterMs, traceparent)),
        Effect.sync(() => cap.release(placement.worker))
      )
    )
    if (sent._tag === "Success") return { placement, sent: sent.success }
    return yield* undelivered(yield* afterSendFailed(asked, placement, sent.failure), placement)
  })

  /**
   * A stale send resolves again, once with the stale check; a second stale send resolves a last
   * time, sent however late. Two catches, not `Effect.retry` with a Schedule: that costs 1.3 µs
   * and about 4 KB a request that is never retried (docs/proxy.md "What Effect constructs cost").
   */
  const placeAndSend = <Sent>(asked: ResolveRequest, transport: Transport<Sent>): Effect.Effect<Attempted<Sent>, Undelivered> =>
    Effect.catchIf(attempt(asked, transport, RE_RESOLVE_AFTER_MS), wasStale, () =>
      Effect.catchIf(attempt(asked, transport, RE_RESOLVE_AFTER_MS), wasStale, () => attempt(asked, transport, Infinity))
    )

  /**
   * After a refusal, one re-place on another worker. A second refusal, or no other worker to
   * re-place on, is `503 worker refused activation, retry`: the client's to retry.
   */
  const rePlace = <Sent>(request: ResolveRequest, transport: Transport<Sent>, refused: Undelivered) =>
    Effect.catchIf(
      placeAndSend({ ...request, excluded: [refused.placement!.worker] }, transport),
      (failure) => wasRefused(failure) || failure.why._tag === "NoLiveBackends",
      (failure) => undelivered(REFUSED_BY, failure.placement ?? refused.placement)
    )

  return <Sent>(request: ResolveRequest, transport: Transport<Sent>): Effect.Effect<Delivery<Sent>> => {
    const placed = transport.canRePlace ? Effect.catchIf(placeAndSend(request, transport), wasRefused, (refused) => rePlace(request, transport, refused)) : placeAndSend(request, transport)
    return Effect.matchCause(placed, deliveryOf as DeliveryOf<Sent>)
  }
}

interface DeliveryOf<Sent> {
  readonly onSuccess: (attempted: Attempted<Sent>) => Delivery<Sent>
  readonly onFailure: (cause: Cause.Cause<Undelivered>) => Delivery<Sent>
}

/** What the last attempt came to, as the delivery's outcome (made once: no handlers per request). */
const deliveryOf: DeliveryOf<unknown> = {
  onSuccess: ({ placement, sent }) => ({ placement, sent, failure: undefined }),
  onFailure: (cause) => {
    const failed = Cause.findError(cause)
    // A defect or an interruption goes on as it is.
    if (failed._tag === "Failure") return { placement: undefined, sent: undefined, failure: cause as Cause.Cause<never> }
    const { why, placement } = failed.success
    return { placement, sent: undefined, failure: answerOf(why) }
  }
}

/** An attempt's error as the client is answered: a refusal left as the last word is the client's to retry. */
const answerOf = (why: AttemptError): Cause.Cause<DeliverError> => {
  switch (why._tag) {
    case "RefusedBy":
      return Cause.fail(new WorkerRefusedActivation())
    case "StaleResolve":
      // The last resolve is sent however late: a send without a deadline is never stale.
      return Cause.die(new Error("a send without a deadline was reported stale"))
    default:
      return Cause.fail(why)
  }
}
