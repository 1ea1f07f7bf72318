// The bare undici proxy of bench/proxy.ts, the Node ceiling: node:http in front, one undici
// Pool (keep-alive) behind, bodies piped both ways, hop-by-hop headers dropped, no routing,
// no checks. WebSocket upgrades go through `pool.upgrade` and are then piped as raw bytes.
// Prints `listening <port>`.
//
//   node dist-bench/bench/undiciProxy.js http://127.0.0.1:<worker port>
import http, { type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import type { Duplex } from "node:stream"
import { Pool } from "undici"

const target = process.argv[2]
if (target === undefined) throw new Error("usage: undiciProxy.js <target url>")

const pool = new Pool(target, { pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: 0, bodyTimeout: 0 })

const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"])

const endToEnd = (headers: IncomingHttpHeaders): Record<string, string | Array<string>> => {
  const kept: Record<string, string | Array<string>> = {}
  for (const name in headers) {
    const value = headers[name]
    if (value !== undefined && !HOP_BY_HOP.has(name)) kept[name] = value
  }
  return kept
}

const server = http.createServer((req, res) => {
  const hasBody = req.headers["content-length"] !== undefined || req.headers["transfer-encoding"] !== undefined
  pool.stream(
    { path: req.url ?? "/", method: req.method as "GET", headers: endToEnd(req.headers), body: hasBody ? req : null },
    ({ statusCode, headers }) => {
      res.writeHead(statusCode, endToEnd(headers as IncomingHttpHeaders))
      return res
    },
    (error) => {
      if (error === null) return
      if (res.headersSent) res.destroy()
      else res.writeHead(502, { "content-length": "0" }).end()
    }
  )
})

server.on("upgrade", (req, socket: Duplex, head: Buffer) => {
  socket.on("error", () => socket.destroy())
  pool
    .upgrade({ path: req.url ?? "/", method: "GET", headers: endToEnd(req.headers), protocol: "websocket" })
    .then(({ headers, socket: upstream }) => {
      let answer = "HTTP/1.1 101 Switching Protocols\r\n"
      for (const [name, value] of Object.entries(headers)) {
        for (const one of Array.isArray(value) ? value : [value]) answer += `${name}: ${one}\r\n`
      }
      socket.write(answer + "\r\n")
      if (head.length > 0) upstream.write(head)
      upstream.on("error", () => socket.destroy())
      upstream.on("close", () => socket.destroy())
      socket.on("close", () => upstream.destroy())
      upstream.pipe(socket)
      socket.pipe(upstream)
    })
    .catch(() => socket.destroy())
})

server.keepAliveTimeout = 60_000
server.listen(0, "127.0.0.1", () => console.log(`listening ${(server.address() as AddressInfo).port}`))
