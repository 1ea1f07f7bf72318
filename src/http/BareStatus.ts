// Upgrade failures (docs/proxy.md "WebSockets"): a bare status line, no body and no
// CORS headers; only `Retry-After` (503) and `connection: close`. A 500 destroys the socket.
import type { Duplex } from "node:stream"
import { statusLine } from "../contract/StatusLine.js"
import { retryAfterSeconds, type Reply } from "../Errors.js"

export const writeBareStatus = (socket: Duplex, reply: Reply): void => {
  if (socket.destroyed) return
  if (reply.status === 500) {
    socket.destroy()
    return
  }
  const retryAfter = reply.retryAfterMs === undefined ? "" : `retry-after: ${retryAfterSeconds(reply.retryAfterMs)}\r\n`
  socket.end(`${statusLine(reply.status)}\r\n${retryAfter}connection: close\r\n\r\n`)
}
