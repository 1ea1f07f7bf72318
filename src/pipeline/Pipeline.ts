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
import { relayBody, sendRequest } from "../proxy/Forward.js"
import { forwardRequestHeaders, peerAddress } from "../proxy/Headers.js"
import { targetOf } from "../proxy/Target.js"
import { openTunnel, sendUpgrade, type TunnelSet } from "../proxy/Tunnel.js"
import { affinityOf } from "./Affinity.js"
import { deliver } from "./Deliver.js"
import { readCaller, type Caller } from "./steps/Attestation.js"
import { checkCallerScope } from "./steps/CallerScope.js"
import { admitByRule, type Principal } from "./steps/DataPlaneRule.js"
import { depthOf } from "./steps/Depth.js"
import { bindingOf, type Binding } from "./steps/HostnameBinding.js"
import { readAddress } from "./steps/Id.js"

interface Admitted {
  readonly address: Address
  readonly caller: Caller | undefined
  readonly depth: number
  readonly principal: Principal | undefined
  readonly binding: Binding
}

const admit = (rawUrl: string, headers: IncomingHttpHeaders) =>
  Effect.gen(function* () {
    const address = yield* readAddress(rawUrl)
    const caller = yield* readCaller(headers)
    const depth = yield* depthOf(caller)
    const principal = yield* admitByRule(address.namespace, headers, caller)
    const binding = yield* bindingOf(address.namespace, headers)
    yield* checkCallerScope(address.namespace, principal, caller)
    return { address, caller, depth, principal, binding } satisfies Admitted
  })

const resolveRequestOf = (admitted: Admitted, affinity: string) => ({
  env: admitted.binding.env,
  namespace: admitted.address.namespace,
  id: admitted.address.id,
  hostname: admitted.binding.hostname,
  caller: admitted.caller?.worker,
  affinity,
  excluded: []
})

/** A request has a body when it says so (RFC 9112 6.3); only those can never be re-placed. */
const hasBody = (headers: IncomingHttpHeaders): boolean =>
  headers["transfer-encoding"] !== undefined || (headers["content-length"] !== undefined && headers["content-length"] !== "0")

export const handleInstanceRequest = (req: IncomingMessage, res: ServerResponse) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const admitted = yield* admit(req.url ?? "/", req.headers)
    const peer = peerAddress(req.socket.remoteAddress)
    const withBody = hasBody(req.headers)
    yield* deliver(resolveRequestOf(admitted, affinityOf(req, config.affinity.key)), {
      canRePlace: !withBody,
      send: (placement, sendBy) =>
        sendRequest(req, res, {
          ...targetOf(placement.advertiseUrl, admitted.address),
          headers: forwardRequestHeaders(req.headers, { epoch: placement.epoch, peer }),
          hasBody: withBody,
          sendBy,
          headersTimeoutMs: config.forwards.timeoutMs
        }),
      finish: relayBody
    })
  })

export const handleUpgrade = (req: IncomingMessage, client: Duplex, head: Buffer, tunnels: TunnelSet) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const admitted = yield* admit(req.url ?? "/", req.headers)
    const peer = peerAddress(req.socket.remoteAddress)
    yield* deliver(resolveRequestOf(admitted, affinityOf(req, config.affinity.key)), {
      canRePlace: true,
      send: (placement, sendBy) =>
        sendUpgrade(req, client, {
          ...targetOf(placement.advertiseUrl, admitted.address),
          headers: forwardRequestHeaders(req.headers, { epoch: placement.epoch, peer }),
          sendBy,
          headersTimeoutMs: config.forwards.timeoutMs
        }),
      finish: (exchange) => openTunnel(exchange, client, head, tunnels)
    })
  })
