// The worker behind every target of bench/proxy.ts, answering the same on any path so that
// direct and through each proxy it does the same work:
//   GET  .../small   a 64-byte body
//   GET  .../large   64 KiB
//   GET  .../huge    1 MiB
//   POST .../upload  reads the whole body (streamed to it by the proxy), answers the 64-byte
//                    body, or 400 when fewer or more bytes came than its content-length said
//   .../ws           a WebSocket echo
// (`/bench/<id>/...`). Prints `listening <port>`.
import http from "node:http"
import type { AddressInfo } from "node:net"
import { WebSocketServer } from "ws"

const SMALL = Buffer.alloc(64, "pinboard")
const LARGE = Buffer.alloc(64 * 1024, "pinboard")
const HUGE = Buffer.alloc(1024 * 1024, "pinboard")
const headersOf = (body: Buffer) => ({ "content-type": "application/octet-stream", "content-length": String(body.length) })
const SMALL_HEADERS = headersOf(SMALL)
const LARGE_HEADERS = headersOf(LARGE)
const HUGE_HEADERS = headersOf(HUGE)

const upload = (req: http.IncomingMessage, res: http.ServerResponse) => {
  let received = 0
  req.on("data", (chunk: Buffer) => {
    received += chunk.length
  })
  req.on("end", () => {
    const expected = req.headers["content-length"]
    if (expected === undefined || Number(expected) === received) res.writeHead(200, SMALL_HEADERS).end(SMALL)
    else res.writeHead(400, { "content-length": "0" }).end()
  })
}

const server = http.createServer((req, res) => {
  const url = req.url ?? ""
  if (req.method === "POST" && url.endsWith("/upload")) upload(req, res)
  else if (url.endsWith("/small")) res.writeHead(200, SMALL_HEADERS).end(SMALL)
  else if (url.endsWith("/large")) res.writeHead(200, LARGE_HEADERS).end(LARGE)
  else if (url.endsWith("/huge")) res.writeHead(200, HUGE_HEADERS).end(HUGE)
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
