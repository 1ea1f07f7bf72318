// The client's address (docs/deploy.md "Behind a load balancer"): the connection's peer (the
// PROXY header's source, where the listener takes one), or for a trusted peer what its
// `X-Forwarded-For` says. What `ip` affinity ranks, the worker's `X-Forwarded-For`, the access
// line's `client` and the span's `client.address`.
import type { IncomingMessage } from "node:http"
import type { Socket } from "node:net"
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../AppConfig.js"
import { peerAddress } from "../proxy/Headers.js"
import { proxiedPeer } from "../serving/ProxyProtocol.js"
import { clientAddress, trustedProxiesOf } from "../serving/TrustedProxies.js"

export interface ClientAddressService {
  readonly of: (req: IncomingMessage) => string
}

export const makeClientAddress = (settings: { readonly trustedProxies: ReadonlyArray<string>; readonly proxyProtocol: boolean }): ClientAddressService => {
  const trusted = trustedProxiesOf(settings.trustedProxies)
  const peerOf = settings.proxyProtocol
    ? (socket: Socket) => proxiedPeer(socket) ?? peerAddress(socket.remoteAddress)
    : (socket: Socket) => peerAddress(socket.remoteAddress)
  // Nobody trusted (the default): one look-up of the socket's address.
  if (trusted.none) return { of: (req) => peerOf(req.socket) }
  return { of: (req) => clientAddress(peerOf(req.socket), req.headers["x-forwarded-for"], trusted) }
}

export class ClientAddress extends Context.Service<ClientAddress, ClientAddressService>()("pinboard/ClientAddress") {
  static readonly layer: Layer.Layer<ClientAddress, never, AppConfig> = Layer.effect(ClientAddress, Effect.map(AppConfig, makeClientAddress))

  static readonly layerTest = (service: ClientAddressService): Layer.Layer<ClientAddress> => Layer.succeed(ClientAddress, service)
}
