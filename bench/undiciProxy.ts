// The bare undici proxy of bench/proxy.ts, the Node ceiling: node:http in front, one undici
// Pool (keep-alive) behind, bodies piped both ways, hop-by-hop headers dropped, no routing,
// no checks. WebSocket upgrades go through `pool.upgrade` and are then piped as raw bytes.
// Prints `listening <port>`.
//
// With a mode and the bench's redis-server port it is one of the floors of `--floors`: what
// any design that runs one Redis script and one Effect fiber per request can reach.
//   evalsha         one EVALSHA of `return 1` (ioredis, auto-pipelined) before each forward
//   evalsha-effect  the same inside one Effect fiber per request: the EVALSHA through
//                   `Effect.tryPromise`, the forward in `Effect.callback` until the response ends
// Upgrades take the bare path in every mode.
//
//   node dist-bench/bench/undiciProxy.js http://127.0.0.1:<worker port> [evalsha|evalsha-effect <redis port>]
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import type { Duplex } from "node:stream"
import { Effect } from "effect"
import { Redis } from "ioredis"
import { Pool } from "undici"

const [target, mode = "bare", redisPort] = process.argv.slice(2)
if (target === undefined || !["bare", "evalsha", "evalsha-effect"].includes(mode) || (mode !== "bare" && redisPort === undefined)) {
  throw new Error("usage: undiciProxy.js <target url> [evalsha|evalsha-effect <redis port>]")
}

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

const badGateway = (res: ServerResponse): void => {
  if (res.headersSent) res.destroy()
  else res.writeHead(502, { "content-length": "0" }).end()
}

/** Forwards one request; `ended` runs once the response has been written out, or has failed. */
const forward = (req: IncomingMessage, res: ServerResponse, ended: () => void): void => {
  const hasBody = req.headers["content-length"] !== undefined || req.headers["transfer-encoding"] !== undefined
  pool.stream(
    { path: req.url ?? "/", method: req.method as "GET", headers: endToEnd(req.headers), body: hasBody ? req : null },
    ({ statusCode, headers }) => {
      res.writeHead(statusCode, endToEnd(headers as IncomingHttpHeaders))
      return res
    },
    (error) => {
      if (error !== null) badGateway(res)
      ended()
    }
  )
}

const nothing = (): void => {}

type Handler = (req: IncomingMessage, res: ServerResponse) => void

/** The floors' Redis call: one EVALSHA of a script registered once (ioredis falls back to EVAL on NOSCRIPT). */
const floorScript = async (port: number): Promise<() => Promise<unknown>> => {
  const redis = new Redis({ host: "127.0.0.1", port, enableAutoPipelining: true }) as Redis & {
    floor: (key: string) => Promise<unknown>
  }
  redis.defineCommand("floor", { numberOfKeys: 1, lua: "return 1" })
  const call = () => redis.floor("bench:floor")
  // Loads the script before the first request, and fails the start when Redis does not answer.
  await call()
  return call
}

const handlerFor = async (): Promise<Handler> => {
  if (mode === "bare") return (req, res) => forward(req, res, nothing)
  const floor = await floorScript(Number(redisPort))
  if (mode === "evalsha") {
    return (req, res) => void floor().then(() => forward(req, res, nothing), () => badGateway(res))
  }
  const runFork = Effect.runFork
  return (req, res) =>
    void runFork(
      Effect.tryPromise(floor).pipe(
        Effect.andThen(Effect.callback<void>((resume) => forward(req, res, () => resume(Effect.void)))),
        Effect.catch(() => Effect.sync(() => badGateway(res)))
      )
    )
}

const server = http.createServer(await handlerFor())

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
// An exit of its own on SIGTERM, so that `--cpu-prof` (bench/profile.ts) writes its profile.
process.once("SIGTERM", () => process.exit(0))
server.listen(0, "127.0.0.1", () => console.log(`listening ${(server.address() as AddressInfo).port}`))
