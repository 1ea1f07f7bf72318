// What the listener's connection readers share (serving/ProxyProtocol.ts, Http2Handoff.ts):
// taking a server's connections before its own listeners, and handing a socket on with the
// bytes read from it given back.
import type { Server as NetServer, Socket } from "node:net"

type ConnectionListener = (this: NetServer, socket: Socket) => void

/**
 * Replaces `server`'s `event` listeners with `take`, which is given each new socket and the way
 * to hand it to those listeners. Listeners added later see sockets before `take` is done.
 */
export const takeConnections = <S extends Socket>(
  server: NetServer,
  event: "connection" | "secureConnection",
  take: (socket: S, toServer: () => void) => void
): void => {
  // rawListeners: a `once` listener keeps its once.
  const own = server.rawListeners(event) as Array<ConnectionListener>
  server.removeAllListeners(event)
  server.on(event, (socket: S) =>
    take(socket, () => {
      for (const listener of own) listener.call(server, socket)
    })
  )
}

/**
 * Gives `received` back to the socket (paused, so the bytes wait in its buffer, then any read
 * behind them) and calls `handOn`. node:http reads the socket's handle itself and parses what
 * waits in the stream's buffer only as the stream emits it: resumed, the bytes given back go
 * first. A reader that took no 'data' yet (node:http2) finds them buffered and reads them itself.
 */
export const handOnWith = (socket: Socket, received: Buffer, handOn: () => void): void => {
  socket.pause()
  if (received.length > 0) socket.unshift(received)
  handOn()
  if (socket.listenerCount("data") > 0 && !socket.destroyed) socket.resume()
}

/**
 * Reads a connection's first bytes until `decide` settles what they are (undefined: read on),
 * then runs what it gave, with every byte read. A connection that ends, fails or stays
 * undecided for `timeoutMs` is destroyed; nothing is written to it.
 */
export const readOpening = (socket: Socket, timeoutMs: number, decide: (received: Buffer) => ((received: Buffer) => void) | undefined): void => {
  let received: Buffer = Buffer.alloc(0)
  const timer = setTimeout(() => drop(), timeoutMs)
  const stop = () => {
    clearTimeout(timer)
    socket.off("data", onData)
    socket.off("end", drop)
    socket.off("error", drop)
    socket.off("close", stop)
  }
  // An 'error' (a reset mid-opening) lands here too, so none goes unhandled.
  function drop() {
    stop()
    socket.destroy()
  }
  function onData(chunk: Buffer) {
    received = received.length === 0 ? chunk : Buffer.concat([received, chunk])
    const decided = decide(received)
    if (decided === undefined) return
    stop()
    decided(received)
  }
  socket.on("data", onData)
  socket.on("end", drop)
  socket.on("error", drop)
  socket.on("close", stop)
}
