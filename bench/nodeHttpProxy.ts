// The node-http-proxy baseline of bench/proxy.ts: `http-proxy` as users set it up today, one
// target, a keep-alive agent, WebSockets on; no routing. Prints `listening <port>`.
//
//   node dist-bench/bench/nodeHttpProxy.js http://127.0.0.1:<worker port>
import http from "node:http"
import type { AddressInfo } from "node:net"
import httpProxy from "http-proxy"

const target = process.argv[2]
if (target === undefined) throw new Error("usage: nodeHttpProxy.js <target url>")

const agent = new http.Agent({ keepAlive: true })
const proxy = httpProxy.createProxyServer({ target, agent, ws: true })
proxy.on("error", (_error, _req, res) => {
  if (res instanceof http.ServerResponse) {
    if (res.headersSent) res.destroy()
    else res.writeHead(502, { "content-length": "0" }).end()
  } else res.destroy()
})

const server = http.createServer((req, res) => proxy.web(req, res))
server.on("upgrade", (req, socket, head) => proxy.ws(req, socket, head))
server.keepAliveTimeout = 60_000
server.listen(0, "127.0.0.1", () => console.log(`listening ${(server.address() as AddressInfo).port}`))
