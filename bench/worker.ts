// The worker behind every target of bench/proxy.ts: a 64-byte and a 64 KiB body, and a
// WebSocket echo, answered the same on any path (`/bench/<id>/small`, `.../large`, `.../ws`),
// so direct and through each proxy it does the same work. Prints `listening <port>`.
import http from "node:http"
import type { AddressInfo } from "node:net"
import { WebSocketServer } from "ws"

const SMALL = Buffer.alloc(64, "pinboard")
const LARGE = Buffer.alloc(64 * 1024, "pinboard")
const headersOf = (body: Buffer) => ({ "content-type": "application/octet-stream", "content-length": String(body.length) })
const SMALL_HEADERS = headersOf(SMALL)
const LARGE_HEADERS = headersOf(LARGE)

const server = http.createServer((req, res) => {
  const url = req.url ?? ""
  if (url.endsWith("/small")) res.writeHead(200, SMALL_HEADERS).end(SMALL)
  else if (url.endsWith("/large")) res.writeHead(200, LARGE_HEADERS).end(LARGE)
  else res.writeHead(404, { "content-length": "0" }).end()
})
// Idle pool connections of the proxies outlive a benchmark cell of the other targets.
server.keepAliveTimeout = 60_000

const sockets = new WebSocketServer({ server, perMessageDeflate: false })
sockets.on("connection", (socket) => {
  socket.on("message", (data, isBinary) => socket.send(data as Buffer, { binary: isBinary }))
  socket.on("error", () => socket.terminate())
})

server.listen(0, "127.0.0.1", () => console.log(`listening ${(server.address() as AddressInfo).port}`))
