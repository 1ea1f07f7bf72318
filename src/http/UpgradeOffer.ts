// Upgrade offers (RFC 9110 section 7.8; docs/proxy.md "What every client gets"). Pinboard takes one
// upgrade, WebSocket, which it tunnels. Any other offer (the `h2c` that `curl --http2` and
// Java's HttpClient send on every plain-http request, say) is ignored, as a server may: the
// request is served as the ordinary HTTP/1.1 request it also is.
//
// node:http (Node 20) hands every offer's socket over as an upgrade before reading the body,
// so a declined offer is given back: its head, written again without the `Upgrade` and
// `HTTP2-Settings` lines, goes in front of what was read after it, and the socket is handed
// to the server as a new connection. node:http then parses the request, its body and any
// pipelined requests after it as it would any others; the `Connection` tokens that named
// the offer are stripped with the other hop-by-hop headers.
import type { IncomingMessage, Server, ServerResponse } from "node:http"
import type { Duplex } from "node:stream"

const WEBSOCKET = "websocket"

/** One header look-up on the common spelling; a list or other casing is read token by token. */
export const isWebSocketOffer = (upgrade: string | undefined): boolean =>
  upgrade !== undefined &&
  (upgrade === WEBSOCKET || upgrade.split(",").some((protocol) => protocol.trim().toLowerCase() === WEBSOCKET))

/** Header lines the offer alone needs; written back, `Upgrade` would make it an upgrade again. */
const isOfferLine = (name: string): boolean => {
  const lower = name.toLowerCase()
  return lower === "upgrade" || lower === "http2-settings"
}

/** The request line and header lines as received (node:http reads them as latin1), less the offer's. */
export const headWithoutOffer = (req: Pick<IncomingMessage, "method" | "url" | "httpVersion" | "rawHeaders">): Buffer => {
  let head = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`
  const raw = req.rawHeaders
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (!isOfferLine(raw[i]!)) head += `${raw[i]}: ${raw[i + 1]}\r\n`
  }
  return Buffer.from(`${head}\r\n`, "latin1")
}

/** The connection as node:http hands it over; `_httpMessage` marks the response it is writing. */
interface ServerSocket extends Duplex {
  readonly _httpMessage?: ServerResponse | null
  readonly setTimeout?: (ms: number) => unknown
}

const writesResponse = (socket: ServerSocket): boolean => socket._httpMessage !== undefined && socket._httpMessage !== null

/**
 * Calls `then` once the connection writes no response of the requests pipelined before the
 * offer: node:http answers those through its first parse of the connection, in order, and
 * would never hand the connection to a second one while they last.
 */
const afterPendingResponses = (socket: ServerSocket, then: () => void): void => {
  if (!writesResponse(socket)) return then()
  // node:http's own `finish` listener, added first, hands the connection to the next response.
  socket._httpMessage!.once("finish", () => afterPendingResponses(socket, then))
}

/** Serves a declined offer as an ordinary request on the same connection. */
export const serveAsRequest = (server: Server, req: IncomingMessage, socket: ServerSocket, head: Buffer): void => {
  const again = headWithoutOffer(req)
  const waited = writesResponse(socket)
  afterPendingResponses(socket, () => {
    // The first parse set node:http's keep-alive timeout (a socket timeout, not a wait of ours,
    // so not on the Clock) when its last response finished: the request handed over must not
    // be cut by it.
    if (waited) socket.setTimeout?.(server.timeout)
    socket.unshift(head.length === 0 ? again : Buffer.concat([again, head]))
    server.emit("connection", socket)
  })
}
