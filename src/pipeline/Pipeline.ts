// An instance request in the seed's check order (proxy-a-request.md "Check order"):
//   id, attestation, depth, data-plane rule, hostname binding, caller scope,
//   resolve, inflight cap, forward.
// The first six admit the request; Deliver.ts runs the last three with their retries, over
// HTTP (Forward.ts) or a WebSocket tunnel (Tunnel.ts).
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import { Effect } from "effect"
import type { Address } from "../Address.js"
import { AppConfig } from "../AppConfig.js"
import { Auth } from "../auth/Auth.js"
import { relayBody, sendRequest } from "../proxy/Forward.js"
import { forwardRequestHeaders, peerAddress } from "../proxy/Headers.js"
import { targetOf } from "../proxy/Target.js"
import type { Outbound } from "../proxy/Exchange.js"
import type { ExchangeNote } from "../observe/Exchange.js"
import { openTunnel, sendUpgrade, type TunnelSet } from "../proxy/Tunnel.js"
import type { Placement } from "../registry/Registry.js"
import { affinityOf } from "./Affinity.js"
import { deliver, type Transport } from "./Deliver.js"
import { readCaller, type Caller } from "./steps/Attestation.js"
import { checkCallerScope } from "./steps/CallerScope.js"
import { admitByRule, type Principal } from "./steps/DataPlaneRule.js"
import { depthOf } from "./steps/Depth.js"
import { bindingOf } from "./steps/HostnameBinding.js"
import { readAddress } from "./steps/Id.js"

interface Admitted {
  readonly address: Address
  readonly caller: Caller | undefined
  readonly depth: number
  readonly principal: Principal | undefined
  /** `""` outside hostname-aware mode. */
  readonly hostname: string
}

const admit = (rawUrl: string, headers: IncomingHttpHeaders, note: ExchangeNote, hostnameAware: boolean) =>
  Effect.gen(function* () {
    const address = yield* readAddress(rawUrl)
    note.namespace = address.namespace
    note.id = address.id
    const caller = yield* readCaller(headers)
    const depth = yield* depthOf(caller)
    const admission = yield* admitByRule(address.namespace, headers, caller)
    const hostname = yield* bindingOf(headers, hostnameAware)
    yield* checkCallerScope(admission, caller)
    return { address, caller, depth, principal: admission.principal, hostname } satisfies Admitted
  })

const resolveRequestOf = (admitted: Admitted, affinity: string) => ({
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

/** Admits the request, then delivers it over the transport made for it. */
const route = <Sent>(req: IncomingMessage, note: ExchangeNote, transportFor: (outboundOf: OutboundOf) => Transport<Sent>) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const auth = yield* Auth
    const admitted = yield* admit(req.url ?? "/", req.headers, note, config.hostnameAware)
    const peer = peerAddress(req.socket.remoteAddress)
    const caller = admitted.caller === undefined ? undefined : `${admitted.caller.namespace}/${admitted.caller.id}`
    const outboundOf: OutboundOf = (placement, sendBy, settled) => {
      note.worker = placement.worker
      note.epoch = placement.epoch
      return {
        ...targetOf(placement.advertiseUrl, admitted.address),
        headers: forwardRequestHeaders(req.headers, {
          epoch: placement.epoch,
          peer,
          attestation: auth.attest({
            worker: placement.worker,
            namespace: admitted.address.namespace,
            id: admitted.address.id,
            epoch: placement.epoch,
            depth: admitted.depth,
            principal: admitted.principal,
            caller,
            ...(admitted.hostname === "" ? {} : { hostname: { env: placement.env, host: admitted.hostname } })
          })
        }),
        sendBy,
        headersTimeoutMs: config.forwards.timeoutMs,
        settled
      }
    }
    yield* deliver(resolveRequestOf(admitted, affinityOf(req, config.affinity.key)), transportFor(outboundOf))
  })

/** Where and what to send for a placement: the worker's target, the forwarded headers, the limits. */
type OutboundOf = (placement: Placement, sendBy: number, settled: () => void) => Outbound

/** `note` learns the namespace, id, worker and epoch as the pipeline does (metrics, access log). */
export const handleInstanceRequest = (req: IncomingMessage, res: ServerResponse, note: ExchangeNote = {}) => {
  const withBody = hasBody(req.headers)
  return route(req, note, (outboundOf) => ({
    canRePlace: !withBody,
    send: (placement, sendBy, settled) => sendRequest(req, res, outboundOf(placement, sendBy, settled), withBody),
    finish: relayBody
  }))
}

export const handleUpgrade = (req: IncomingMessage, client: Duplex, head: Buffer, tunnels: TunnelSet, note: ExchangeNote = {}) =>
  route(req, note, (outboundOf) => ({
    canRePlace: true,
    send: (placement, sendBy, settled) => sendUpgrade(req, client, outboundOf(placement, sendBy, settled)),
    finish: (exchange) => {
      note.status = exchange.statusCode
      return openTunnel(exchange, client, head, tunnels)
    }
  }))
