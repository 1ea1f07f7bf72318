// Which connections of the data-plane listener speak HTTP/2 (docs/deploy.md "HTTP/2"): over
// TLS, those whose client chose `h2` by ALPN; on a plain listener with h2c, those that open with
// the HTTP/2 preface (RFC 9113 3.4, prior knowledge). They go to the HTTP/2 server; every other
// connection stays with node:http, untouched.
import type { Server as HttpServer } from "node:http"
import type { Socket } from "node:net"
import type { Server as TlsServer, TLSSocket } from "node:tls"

type ConnectionListener = (this: unknown, socket: Socket) => void

/** Sends `h2` connections of a TLS listener (node:https) to `http2`, the rest to its own listeners. */
export const handOffByAlpn = (server: TlsServer, http2: (socket: Socket) => void): void => {
  const http1 = server.rawListeners("secureConnection") as Array<ConnectionListener>
  server.removeAllListeners("secureConnection")
  server.on("secureConnection", (socket: TLSSocket) => {
    if (socket.alpnProtocol === "h2") return http2(socket)
    for (const listener of http1) listener.call(server, socket)
  })
}

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1")

/** `h2`: the bytes are the whole preface; `h1`: they cannot begin it; `more`: a prefix of it so far. */
export const prefaceOf = (received: Buffer): "h2" | "h1" | "more" => {
  const length = Math.min(received.length, PREFACE.length)
  if (received.compare(PREFACE, 0, length, 0, length) !== 0) return "h1"
  return length === PREFACE.length ? "h2" : "more"
}

/**
 * Sends the connections of a plain listener (node:http) that open with the HTTP/2 preface to
 * `http2`, the rest to its own 'connection' listeners, with the bytes read so far given back
 * (unshift). A connection that sends neither within `timeoutMs` is closed. Install it before
 * the PROXY protocol reader, which then runs first.
 */
export const handOffByPreface = (server: HttpServer, http2: (socket: Socket) => void, options: { readonly timeoutMs: number }): void => {
  const http1 = server.rawListeners("connection") as Array<ConnectionListener>
  server.removeAllListeners("connection")
  server.on("connection", (socket: Socket) => {
    let received: Buffer = Buffer.alloc(0)
    const timer = setTimeout(() => socket.destroy(), options.timeoutMs)
    const stop = () => {
      clearTimeout(timer)
      socket.off("data", onData)
      socket.off("error", onError)
    }
    const onError = () => {
      stop()
      socket.destroy()
    }
    const onData = (chunk: Buffer) => {
      received = received.length === 0 ? chunk : Buffer.concat([received, chunk])
      const protocol = prefaceOf(received)
      if (protocol === "more") return
      stop()
      socket.pause()
      socket.unshift(received)
      if (protocol === "h2") return http2(socket)
      for (const listener of http1) listener.call(server, socket)
      // As after a PROXY header (serving/ProxyProtocol.ts): node:http resumes a socket it reads itself.
      if (socket.listenerCount("data") > 0 && !socket.destroyed) socket.resume()
    }
    socket.on("data", onData)
    socket.on("error", onError)
  })
}
