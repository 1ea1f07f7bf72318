// An instance request in the check order of docs/proxy.md "Check order":
//   id, attestation, depth, data-plane rule, hostname binding, caller scope,
//   resolve, inflight cap, forward.
// The first six admit the request; Deliver.ts runs the last three with their retries, over
// HTTP (Forward.ts) or a WebSocket tunnel (Tunnel.ts). A step that decides at once returns an
// Exit, which `Effect.gen` continues without a turn of the fiber. The pipeline never fails: it
// returns what the request came to (http/Answer.ts answers it, observe/Exchange.ts records it).
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import { type Cause, Context, Effect, Layer } from "effect"
import type { Address, AddressError } from "../Address.js"
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

const refusedBeforeAdmission = <Sent>(facts: ExchangeFacts, failure: Cause.Cause<InstanceError>): Routed<Sent> => ({
  outcome: { ...facts, failure },
  sent: undefined
})

/**
 * A defect (a throw, a die) where no step expected one: the outcome says so, and the request
 * is answered `500 internal error` like any outcome, never left unanswered.
 */
const defective = (cause: Cause.Cause<never>): InstanceOutcome => ({ ...NO_FACTS, failure: cause })

/** A request's outcome, or a defect's (made once: no handlers per request). */
const outcomeOf = { onSuccess: (routed: Routed<unknown>) => routed.outcome, onFailure: defective }

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

      // The steps' bodies are made once here: a generator function made per request costs
      // about 1 µs more (`npm run bench:effect`, docs/proxy.md "What a request costs").

      /** Steps 2 to 6, in the documented order. */
      const admit: (rawUrl: string, headers: IncomingHttpHeaders, address: Address) => Effect.Effect<Admitted, AdmitError> = Effect.fnUntraced(
        function* (rawUrl, headers, address) {
          const caller = yield* readCaller(auth, registry, headers)
          const depth = yield* depthOf(caller)
          const admission = yield* admitByRule(auth.rules, address.namespace, headers, caller)
          const hostname = yield* bindingOf(rawUrl, headers, hostnameAware)
          yield* checkCallerScope(admission, caller)
          return { address, caller, depth, principal: admission.principal, hostname }
        }
      )

      /** The check order: the id, its admission, then the delivery over the transport made for it. */
      const route = Effect.fnUntraced(function* <Sent>(req: IncomingMessage, transportFor: (admitted: Admitted, client: string) => Transport<Sent>) {
        const rawUrl = req.url ?? "/"
        const address = yield* Effect.exit(readAddress(rawUrl))
        if (address._tag === "Failure") return refusedBeforeAdmission<Sent>(NO_FACTS, address.cause)
        const { namespace, id } = address.value
        const admitted = yield* Effect.exit(admit(rawUrl, req.headers, address.value))
        if (admitted._tag === "Failure") return refusedBeforeAdmission<Sent>({ ...NO_FACTS, namespace, id }, admitted.cause)
        const client = clientAddress.of(req)
        const resolveRequest = resolveRequestOf(admitted.value, affinityOf(req, affinityKey, client))
        const { placement, sent, failure } = yield* deliver(resolveRequest, transportFor(admitted.value, client))
        const outcome: InstanceOutcome = { namespace, id, client, worker: placement?.worker, epoch: placement?.epoch, upgradeStatus: undefined, failure }
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
            outcomeOf
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
            (cause) => Effect.succeed(defective(cause))
          )
      }
    })
  )
}
