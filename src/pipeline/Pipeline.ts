// An instance request in the check order of docs/proxy.md "Check order":
//   id, attestation, depth, data-plane rule, hostname binding, caller scope,
//   resolve, inflight cap, forward.
// The first six admit the request; Deliver.ts runs the last three with their retries, over
// HTTP (Forward.ts) or a WebSocket tunnel (Tunnel.ts). A step that decides at once returns an
// Exit, which `Effect.gen` continues without a turn of the fiber. The pipeline never fails: it
// returns what the request came to (http/Answer.ts answers it, observe/Exchange.ts records it).
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import { type Cause, Context, Effect, Layer, Result } from "effect"
import { parseAddress, type Address, type AddressError } from "../Address.js"
import { AppConfig } from "../AppConfig.js"
import { Auth, type AuthService } from "../auth/Auth.js"
import type { CallerClaims } from "../auth/CallerToken.js"
import type { DepthExceeded, InsufficientScope } from "../Errors.js"
import { NO_FACTS, type ExchangeFacts } from "../observe/Exchange.js"
import type { Outbound } from "../proxy/Exchange.js"
import { ForwardContext } from "../proxy/ForwardContext.js"
import { sendRequest } from "../proxy/Forward.js"
import { forwardRequestHeaders } from "../proxy/Headers.js"
import { targetOf } from "../proxy/Target.js"
import { openTunnel, sendUpgrade, type TunnelSet } from "../proxy/Tunnel.js"
import { Registry, type Placement, type ResolveRequest } from "../registry/Registry.js"
import { affinityOf } from "./Affinity.js"
import { ClientAddress } from "./ClientAddress.js"
import { Deliver, type DeliverError, type Transport } from "./Deliver.js"
import { readCaller, type AttestationError } from "./steps/Attestation.js"
import { checkCallerScope } from "./steps/CallerScope.js"
import { admitByRule, type Principal, type RuleError } from "./steps/DataPlaneRule.js"
import { depthOf } from "./steps/Depth.js"
import { bindingOf, type BindingError } from "./steps/HostnameBinding.js"
import { readAddress } from "./steps/Id.js"

interface Admitted {
  readonly address: Address
  readonly caller: CallerClaims | undefined
  readonly depth: number
  readonly principal: Principal | undefined
  /** `""` outside hostname-aware mode. */
  readonly hostname: string
}

type AdmitError = AttestationError | DepthExceeded | RuleError | BindingError | InsufficientScope

export type InstanceError = AddressError | AdmitError | DeliverError

/** What an instance request came to: the facts learned, and why it was not delivered, if it was not. */
export interface InstanceOutcome extends ExchangeFacts {
  readonly failure: Cause.Cause<InstanceError> | undefined
}

/** An outcome and what was sent, when something was (an upgrade's exchange opens its tunnel). */
interface Routed<Sent> {
  readonly outcome: InstanceOutcome
  readonly sent: Sent | undefined
}

const resolveRequestOf = (admitted: Admitted, affinity: string): ResolveRequest => ({
  // In hostname-aware mode the registry finds the env from the (hostname, namespace) binding.
  env: "",
  namespace: admitted.address.namespace,
  id: admitted.address.id,
  hostname: admitted.hostname,
  caller: admitted.caller?.worker,
  affinity,
  excluded: []
})

/** A request has a body when it says so (RFC 9112 6.3); only those can never be re-placed. */
const hasBody = (headers: IncomingHttpHeaders): boolean =>
  headers["transfer-encoding"] !== undefined || (headers["content-length"] !== undefined && headers["content-length"] !== "0")

/** Where and what to send for a placement: the worker's target and the forwarded headers. */
const outboundOf = (
  auth: AuthService,
  req: IncomingMessage,
  client: string,
  admitted: Admitted,
  placement: Placement,
  sendBy: number,
  traceparent: string | undefined
): Outbound => {
  const { address, caller } = admitted
  const target = targetOf(placement.advertiseUrl, address)
  return {
    origin: target.origin,
    path: target.path,
    headers: forwardRequestHeaders(req.headers, {
      epoch: placement.epoch,
      peer: client,
      traceparent,
      attestation: auth.attest({
        worker: placement.worker,
        namespace: address.namespace,
        id: address.id,
        epoch: placement.epoch,
        depth: admitted.depth,
        principal: admitted.principal,
        caller: caller === undefined ? undefined : `${caller.namespace}/${caller.id}`,
        hostname: admitted.hostname === "" ? undefined : { env: placement.env, host: admitted.hostname }
      })
    }),
    sendBy
  }
}

/**
 * A request refused by steps 1 to 6 (a delivery never fails), or a defect (a throw, a die) where
 * no step expected one: the facts are the target's namespace and id, when it has them. The
 * request is answered from the catalogue (a defect: `500 internal error`), never left unanswered.
 */
const outcomeBeforeDelivery = (rawUrl: string, failure: Cause.Cause<InstanceError>): InstanceOutcome => {
  const address = parseAddress(rawUrl)
  if (Result.isFailure(address)) return { ...NO_FACTS, failure }
  return { ...NO_FACTS, namespace: address.success.namespace, id: address.success.id, failure }
}

export interface InstancePipelineService {
  readonly request: (req: IncomingMessage, res: ServerResponse) => Effect.Effect<InstanceOutcome>
  readonly upgrade: (req: IncomingMessage, client: Duplex, head: Buffer, tunnels: TunnelSet) => Effect.Effect<InstanceOutcome>
}

export class InstancePipeline extends Context.Service<InstancePipeline, InstancePipelineService>()("pinboard/InstancePipeline") {
  static readonly layer: Layer.Layer<InstancePipeline, never, AppConfig | Auth | Registry | ForwardContext | Deliver | ClientAddress> = Layer.effect(
    InstancePipeline,
    Effect.gen(function* () {
      const config = yield* AppConfig
      const auth = yield* Auth
      const forward = yield* ForwardContext
      const registry = yield* Registry
      const deliver = yield* Deliver
      const clientAddress = yield* ClientAddress
      const { hostnameAware } = config
      const affinityKey = config.affinity.key

      /**
       * The check order, one step a line. Made once here: a generator function made per
       * request costs about 1 µs more (docs/proxy.md "What Effect constructs cost").
       */
      const route = Effect.fnUntraced(function* <Sent>(req: IncomingMessage, transportFor: (admitted: Admitted, client: string) => Transport<Sent>) {
        const rawUrl = req.url ?? "/"
        const headers = req.headers
        const address = yield* readAddress(rawUrl)
        const caller = yield* readCaller(auth, registry, headers)
        const depth = yield* depthOf(caller)
        const admission = yield* admitByRule(auth.rules, address.namespace, headers, caller)
        const hostname = yield* bindingOf(rawUrl, headers, hostnameAware)
        yield* checkCallerScope(admission, caller)
        const admitted: Admitted = { address, caller, depth, principal: admission.principal, hostname }
        // Resolve, inflight cap and forward, with their retries.
        const client = clientAddress.of(req)
        const { placement, sent, failure } = yield* deliver(resolveRequestOf(admitted, affinityOf(req, affinityKey, client)), transportFor(admitted, client))
        const outcome: InstanceOutcome = {
          namespace: address.namespace,
          id: address.id,
          client,
          worker: placement?.worker,
          epoch: placement?.epoch,
          upgradeStatus: undefined,
          failure
        }
        return { outcome, sent } satisfies Routed<Sent>
      })

      return {
        request: (req, res) =>
          Effect.matchCause(
            route(req, (admitted, client) => {
              const withBody = hasBody(req.headers)
              // Once the headers are relayed, the body streams on by itself.
              return {
                canRePlace: !withBody,
                send: (placement, sendBy, traceparent) =>
                  sendRequest(forward, req, res, outboundOf(auth, req, client, admitted, placement, sendBy, traceparent), withBody)
              }
            }),
            { onSuccess: (routed) => routed.outcome, onFailure: (cause) => outcomeBeforeDelivery(req.url ?? "/", cause) }
          ),
        upgrade: (req, client, head, tunnels) =>
          Effect.catchCause(
            Effect.flatMap(
              route(req, (admitted, clientIp) => ({
                canRePlace: true,
                send: (placement, sendBy, traceparent) => sendUpgrade(forward, req, client, outboundOf(auth, req, clientIp, admitted, placement, sendBy, traceparent))
              })),
              ({ outcome, sent }) =>
                sent === undefined ? Effect.succeed(outcome) : Effect.as(openTunnel(sent, client, head, tunnels), { ...outcome, upgradeStatus: sent.statusCode })
            ),
            (cause) => Effect.succeed(outcomeBeforeDelivery(req.url ?? "/", cause))
          )
      }
    })
  )
}
