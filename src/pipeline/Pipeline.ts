// An instance request in the check order of docs/proxy.md "Check order":
//   id, attestation, depth, data-plane rule, hostname binding, caller scope,
//   resolve, inflight cap, forward.
// The first six admit the request; Deliver.ts runs the last three with their retries, over
// HTTP (Forward.ts) or a WebSocket tunnel (Tunnel.ts). The pipeline is made once per
// process from its services, so that a request pays for none of that. It never fails: its
// outcome is the facts it learned and, when it did not deliver, why (http/Answer.ts answers it).
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import { type Cause, Context, Effect, Layer } from "effect"
import type { Address, AddressError } from "../Address.js"
import { AppConfig } from "../AppConfig.js"
import { Auth, type AuthService } from "../auth/Auth.js"
import type { CallerClaims } from "../auth/CallerToken.js"
import type { ExchangeFacts } from "../observe/Exchange.js"
import type { Outbound } from "../proxy/Exchange.js"
import { ForwardContext } from "../proxy/ForwardContext.js"
import { sendRequest } from "../proxy/Forward.js"
import { forwardRequestHeaders } from "../proxy/Headers.js"
import { targetOf } from "../proxy/Target.js"
import { openTunnel, sendUpgrade, type TunnelSet } from "../proxy/Tunnel.js"
import { Registry, type Placement, type RegistryService, type ResolveRequest } from "../registry/Registry.js"
import { affinityOf } from "./Affinity.js"
import { ClientAddress } from "./ClientAddress.js"
import { Deliver, type DeliverError, type Transport } from "./Deliver.js"
import { readCaller, type AttestationError } from "./steps/Attestation.js"
import { checkCallerScope } from "./steps/CallerScope.js"
import { admitByRule, type Principal, type RuleError } from "./steps/DataPlaneRule.js"
import { depthOf } from "./steps/Depth.js"
import { bindingOf, type BindingError } from "./steps/HostnameBinding.js"
import { readAddress } from "./steps/Id.js"
import { afterStep } from "./steps/AfterStep.js"
import type { DepthExceeded, InsufficientScope } from "../Errors.js"

interface Admitted {
  readonly address: Address
  readonly caller: CallerClaims | undefined
  readonly depth: number
  readonly principal: Principal | undefined
  /** `""` outside hostname-aware mode. */
  readonly hostname: string
}

type AdmitError = AddressError | AttestationError | DepthExceeded | RuleError | BindingError | InsufficientScope

export type InstanceError = AdmitError | DeliverError

/** What an instance request came to: the facts learned, and why it was not delivered, if it was not. */
export interface InstanceOutcome extends ExchangeFacts {
  readonly failure: Cause.Cause<InstanceError> | undefined
}

/** An outcome as the pipeline learns it, step by step; nothing outside this module writes it. */
class Learned implements InstanceOutcome {
  namespace: string | undefined = undefined
  id: string | undefined = undefined
  worker: string | undefined = undefined
  epoch: string | undefined = undefined
  upgradeStatus: number | undefined = undefined
  client: string | undefined = undefined
  failure: Cause.Cause<InstanceError> | undefined = undefined
}

/** The first six steps, in the order of docs/proxy.md "Check order"; `learned` gets the namespace and id. */
const admit = (
  auth: AuthService,
  registry: RegistryService,
  hostnameAware: boolean,
  rawUrl: string,
  headers: IncomingHttpHeaders,
  learned: Learned
): Effect.Effect<Admitted, AdmitError> =>
  afterStep(readAddress(rawUrl), (address) => {
    learned.namespace = address.namespace
    learned.id = address.id
    return afterStep(readCaller(auth, registry, headers), (caller) =>
      afterStep(depthOf(caller), (depth) =>
        afterStep(admitByRule(auth.rules, address.namespace, headers, caller), (admission) =>
          afterStep(bindingOf(rawUrl, headers, hostnameAware), (hostname) =>
            afterStep(checkCallerScope(admission, caller), () =>
              Effect.succeed({ address, caller, depth, principal: admission.principal, hostname })
            )
          )
        )
      )
    )
  })

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
  learned: Learned,
  placement: Placement,
  sendBy: number,
  settled: () => void,
  traceparent: string | undefined
): Outbound => {
  learned.worker = placement.worker
  learned.epoch = placement.epoch
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
    sendBy,
    settled
  }
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

      /** Admits the request, then delivers it over the transport made for it. Suspended: what the
       * steps decide at once is decided in the fiber, so a throw is a defect there (500). */
      const route = <Sent>(
        req: IncomingMessage,
        learned: Learned,
        transportFor: (admitted: Admitted, clientIp: string) => Transport<Sent>
      ): Effect.Effect<InstanceOutcome> =>
        Effect.matchCause(
          Effect.suspend(() =>
            afterStep(admit(auth, registry, hostnameAware, req.url ?? "/", req.headers, learned), (admitted) => {
              const client = (learned.client = clientAddress.of(req))
              return deliver(resolveRequestOf(admitted, affinityOf(req, affinityKey, client)), transportFor(admitted, client))
            })
          ),
          {
            onSuccess: () => learned,
            onFailure: (cause) => {
              learned.failure = cause
              return learned
            }
          }
        )

      return {
        request: (req, res) => {
          const learned = new Learned()
          return route(req, learned, (admitted, clientIp) => {
            const withBody = hasBody(req.headers)
            // No finish: the body streams on by itself once the headers are relayed.
            return {
              canRePlace: !withBody,
              send: (placement, sendBy, settled, traceparent) =>
                sendRequest(forward, req, res, outboundOf(auth, req, clientIp, admitted, learned, placement, sendBy, settled, traceparent), withBody)
            }
          })
        },
        upgrade: (req, client, head, tunnels) => {
          const learned = new Learned()
          return route(req, learned, (admitted, clientIp) => ({
            canRePlace: true,
            send: (placement, sendBy, settled, traceparent) =>
              sendUpgrade(forward, req, client, outboundOf(auth, req, clientIp, admitted, learned, placement, sendBy, settled, traceparent)),
            finish: (exchange) => {
              learned.upgradeStatus = exchange.statusCode
              return openTunnel(exchange, client, head, tunnels)
            }
          }))
        }
      }
    })
  )
}
