// Resolve, inflight cap and forward, with the retries of routing.md "Retries Pinboard makes"
// and the seed's "In-band refusal". The same for HTTP and WebSocket upgrades: each brings
// a Transport that sends to a placement and, once the worker's headers are in, finishes.
import { Data, Effect } from "effect"
import { BadGateway, WorkerAtCapacity, WorkerRefusedActivation, type ClientAborted, type UpstreamTimeout } from "../Errors.js"
import type { SendError } from "../proxy/Exchange.js"
import { MAX_RE_RESOLVES, RE_RESOLVE_AFTER_MS } from "../proxy/Limits.js"
import type { Deadlines } from "../proxy/Deadlines.js"
import type { Upstream } from "../proxy/Upstream.js"
import { Registry, type Placement, type RegistryService, type ResolveRequest } from "../registry/Registry.js"
import { InflightCap, type InflightCapService } from "./steps/InflightCap.js"
import { resolvePlacement, type ResolveError } from "./steps/Resolve.js"

export interface Transport<Sent> {
  /** Requests without a body and upgrades may be re-placed after a refusal: nothing is replayed. */
  readonly canRePlace: boolean
  /**
   * Sends to the placement unless the clock is past `sendBy`; succeeds once the worker's
   * headers are in. Calls `settled` once when they are, or when the send has ended without them.
   */
  readonly send: (
    placement: Placement,
    sendBy: number,
    settled: () => void
  ) => Effect.Effect<Sent, SendError, Upstream | Deadlines>
  readonly finish: (sent: Sent) => Effect.Effect<void>
}

export type DeliverError = ResolveError | WorkerAtCapacity | WorkerRefusedActivation | BadGateway | UpstreamTimeout | ClientAborted

type Requirements = Registry | InflightCap | Upstream | Deadlines

/** A refusal, once the placement is released and the worker's nack counted. */
class RefusedBy extends Data.TaggedError("RefusedBy")<{ readonly worker: string }> {}

export const deliver = <Sent>(
  request: ResolveRequest,
  transport: Transport<Sent>
): Effect.Effect<void, DeliverError, Requirements> =>
  Effect.flatMap(Registry, (registry) => Effect.flatMap(InflightCap, (cap) => deliverWith(registry, cap, request, transport)))

const deliverWith = <Sent>(
  registry: RegistryService,
  cap: InflightCapService,
  request: ResolveRequest,
  transport: Transport<Sent>
): Effect.Effect<void, DeliverError, Requirements> => {
  // The placement's env: in hostname-aware mode the registry finds it from the pair's binding.
  const release = (placement: Placement) =>
    Effect.ignore(registry.release({ env: placement.env, namespace: request.namespace, id: request.id }, placement.epoch))

  // One resolve, inflight cap and send. A send that would leave more than RE_RESOLVE_AFTER_MS after its
  // resolve resolves again instead, at most MAX_RE_RESOLVES times; then it is sent as is.
  const attempt = (excluded: ReadonlyArray<string>, reResolvesLeft: number): Effect.Effect<Sent, DeliverError | RefusedBy, Requirements> =>
    Effect.flatMap(resolvePlacement({ ...request, excluded }), ({ placement, resolvedAt }) => {
      const sendBy = reResolvesLeft > 0 ? resolvedAt + RE_RESOLVE_AFTER_MS : Infinity
      const worker = placement.worker
      if (!cap.tryAcquire(worker)) return new WorkerAtCapacity()
      return transport.send(placement, sendBy, () => cap.release(worker)).pipe(
        Effect.catchTags({
          StaleResolve: () => attempt(excluded, reResolvesLeft - 1),
          // Releasing a new placement whose worker cannot be reached lets the client's retry re-place.
          ConnectFailed: ({ cause }) =>
            Effect.zipRight(placement.isNew ? release(placement) : Effect.void, new BadGateway({ cause })),
          Refused: () =>
            Effect.zipRight(
              Effect.zipRight(release(placement), Effect.ignore(registry.nack(placement.worker))),
              new RefusedBy({ worker: placement.worker })
            )
        })
      )
    })

  // After a refusal, one re-place on another worker; a second refusal, or no other
  // worker, is the client's to retry.
  const refusedActivation = () => new WorkerRefusedActivation()
  return attempt([], MAX_RE_RESOLVES).pipe(
    Effect.catchTag("RefusedBy", ({ worker }) =>
      transport.canRePlace
        ? attempt([worker], MAX_RE_RESOLVES).pipe(
            Effect.catchTags({ RefusedBy: refusedActivation, NoLiveBackends: refusedActivation })
          )
        : refusedActivation()
    ),
    Effect.flatMap(transport.finish)
  )
}
