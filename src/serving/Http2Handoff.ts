// Which connections of the data-plane listener speak HTTP/2 (docs/deploy.md "HTTP/2"): over
// TLS, those whose client chose `h2` by ALPN; on a plain listener with h2c, those that open with
// the HTTP/2 preface (RFC 9113 3.4, prior knowledge). They go to the HTTP/2 server; every other
// connection stays with node:http, untouched.
import type { Server as HttpServer } from "node:http"
import type { Socket } from "node:net"
import type { Server as TlsServer, TLSSocket } from "node:tls"
import { handOnWith, readOpening, takeConnections } from "./ConnectionTakeover.js"

/** Sends `h2` connections of a TLS listener (node:https) to `http2`, the rest to its own listeners. */
export const handOffByAlpn = (server: TlsServer, http2: (socket: Socket) => void): void =>
  takeConnections(server, "secureConnection", (socket: TLSSocket, toServer) => (socket.alpnProtocol === "h2" ? http2(socket) : toServer()))

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1")

/** `h2`: the bytes are the whole preface; `h1`: they cannot begin it; `more`: a prefix of it so far. */
export const prefaceOf = (received: Buffer): "h2" | "h1" | "more" => {
  const length = Math.min(received.length, PREFACE.length)
  if (received.compare(PREFACE, 0, length, 0, length) !== 0) return "h1"
  return length === PREFACE.length ? "h2" : "more"
}

/**
 * Sends the connections of a plain listener (node:http) that open with the HTTP/2 preface to
 * `http2`, the rest to its own 'connection' listeners, with the bytes read so far given back.
 * A connection that sends neither within `timeoutMs` is closed. Install it before the PROXY
 * protocol reader, which then runs first.
 */
export const handOffByPreface = (server: HttpServer, http2: (socket: Socket) => void, options: { readonly timeoutMs: number }): void =>
  takeConnections(server, "connection", (socket: Socket, toServer) =>
    readOpening(socket, options.timeoutMs, (received) => {
      switch (prefaceOf(received)) {
        case "more":
          return undefined
        case "h2":
          return () => handOnWith(socket, received, () => http2(socket))
        case "h1":
          return () => handOnWith(socket, received, toServer)
      }
    })
  )
