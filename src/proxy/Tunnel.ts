// A WebSocket upgrade through to the worker (docs/proxy.md "WebSockets"): the worker's 101 relayed
// without `Pinboard-*` and `Pinned-Refusal`, then the two sockets piped, with TCP
// keepalive as the tunnel's dead-peer detection. A non-101 answer has its status line
// relayed, bare.
import type { IncomingMessage } from "node:http"
import type { Duplex } from "node:stream"
import { Effect } from "effect"
import type { Dispatcher } from "undici"
import { ClientAborted } from "../Errors.js"
import { awaitHeaders, Exchange, Phase, type Outbound, type SendError } from "./Exchange.js"
import type { ForwardContextService } from "./ForwardContext.js"
import { TUNNEL_KEEPALIVE_MS } from "./Limits.js"
import { isPinboardHeader } from "../contract/Headers.js"
import { statusLine } from "../contract/StatusLine.js"

/** Open tunnels, for graceful shutdown to close once in-flight forwards are done. */
export type TunnelSet = Set<Duplex>

class UpgradeExchange extends Exchange {
  statusCode = 0
  headers: Record<string, string | Array<string>> = {}
  socket: Duplex | undefined

  protected onFailure(): void {
    this.socket?.destroy()
  }

  onRequestUpgrade(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | Array<string>>,
    socket: Duplex
  ): void {
    this.statusCode = statusCode
    this.headers = headers
    this.socket = socket
    this.headersIn()
    this.advance(Phase.Headers)
  }

  /** A non-101 answer: its status line is relayed. */
  protected answered(statusCode: number): void {
    this.statusCode = statusCode
  }
}

/** Dispatches the upgrade and waits for the worker's answer: a 101 and its socket, or a status. */
export const sendUpgrade = (
  forward: ForwardContextService,
  req: IncomingMessage,
  client: Duplex,
  outbound: Outbound
): Effect.Effect<UpgradeExchange, SendError> => {
  if (client.destroyed) return new ClientAborted()
  const exchange = new UpgradeExchange(forward, outbound, false)
  forward.upstream.dispatch(
    {
      origin: outbound.origin,
      path: outbound.path,
      method: req.method ?? "GET",
      headers: outbound.headers as Record<string, string | Array<string>>,
      upgrade: String(req.headers.upgrade ?? "websocket"),
      headersTimeout: 0,
      bodyTimeout: 0
    },
    exchange
  )
  return awaitHeaders(exchange, () => client.destroyed)
}

const upgradeHead = (statusCode: number, headers: Record<string, string | Array<string>>): string => {
  let head = `${statusLine(statusCode)}\r\n`
  for (const name in headers) {
    if (isPinboardHeader(name)) continue
    const value = headers[name]!
    for (const one of Array.isArray(value) ? value : [value]) head += `${name}: ${one}\r\n`
  }
  return `${head}\r\n`
}

/** Relays the worker's answer; on a 101, pipes the sockets until either side ends. */
export const openTunnel = (exchange: UpgradeExchange, client: Duplex, head: Buffer, tunnels: TunnelSet): Effect.Effect<void> =>
  Effect.sync(() => {
    const worker = exchange.socket
    if (worker === undefined) {
      client.end(`${statusLine(exchange.statusCode)}\r\nconnection: close\r\n\r\n`)
      return
    }
    client.write(upgradeHead(exchange.statusCode, exchange.headers))
    if (head.length > 0) worker.write(head)
    for (const socket of [client, worker]) {
      const tcp = socket as Duplex & { setKeepAlive?: (enable: boolean, delayMs: number) => void; setNoDelay?: () => void }
      // The kernel's TCP keep-alive, not Clock: the OS probes an idle peer, and no fiber waits on it.
      tcp.setKeepAlive?.(true, TUNNEL_KEEPALIVE_MS)
      tcp.setNoDelay?.()
    }
    const close = () => {
      tunnels.delete(client)
      client.destroy()
      worker.destroy()
    }
    for (const socket of [client, worker]) {
      socket.once("error", close)
      socket.once("close", close)
    }
    tunnels.add(client)
    worker.pipe(client)
    client.pipe(worker)
  })
