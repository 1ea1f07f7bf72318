// The soak's worker process (reliability/soak.ts): built on the worker library, hosting the same
// small definition on every namespace it is given. Each activation keeps a little state (a
// counter and a 256-byte buffer) so activations cost memory the way real ones do; a short idle
// timeout makes ids come and go.
//
//   GET  /state          200 {worker, id, epoch, n}
//   POST /echo           reads the body; 200 {worker, id, bytes, n}
//   POST /relay?ns=/x    calls the instance "<id>.r" of namespace /x (GET /state) through
//                        Pinboard; 200 with the callee's status in the body when it is below
//                        500, else its status relayed (a failed call: 503 {"error":"relay failed"})
//   anything else        404
//   WebSocket            echoes every message
//
//   node dist-bench/reliability/soak/worker.js --pinboard URL --token T --worker W \
//     --namespaces /a,/b [--idle-ms 2000]
//
// Prints `soak-worker <id> ready on <port>` once registered. SIGTERM is the library's graceful
// stop (drain, deactivate, deregister), then exit 0.
import type { IncomingMessage, ServerResponse } from "node:http"
import { parseArgs } from "node:util"
import { defineInstance, startWorker } from "../../src/worker/index.js"

const { values: flags } = parseArgs({
  options: {
    pinboard: { type: "string" },
    token: { type: "string" },
    worker: { type: "string" },
    namespaces: { type: "string" },
    "idle-ms": { type: "string" }
  }
})
const required = (name: "pinboard" | "token" | "worker" | "namespaces"): string => {
  const value = flags[name]
  if (value === undefined) {
    process.stderr.write(`soak-worker: --${name} is required\n`)
    process.exit(2)
  }
  return value
}
const worker = required("worker")
const namespaces = required("namespaces").split(",").filter((ns) => ns !== "")
const idleMs = Number(flags["idle-ms"] ?? 2000)

const json = (res: ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text)
}

const bodyLength = async (req: IncomingMessage): Promise<number> => {
  let bytes = 0
  for await (const chunk of req) bytes += (chunk as Buffer).length
  return bytes
}

interface State {
  n: number
  readonly blob: Buffer
}

const definition = defineInstance({
  activate: (): State => ({ n: 0, blob: Buffer.alloc(256, 1) }),
  idleTimeoutMs: idleMs,
  routes: {
    "GET /state": ({ state, activation }, res) => {
      state.n++
      json(res, 200, { worker, id: activation.id, epoch: activation.epoch, n: state.n })
    },
    "POST /echo": async ({ state, activation, req }, res) => {
      const bytes = await bodyLength(req)
      state.n++
      json(res, 200, { worker, id: activation.id, bytes, n: state.n })
    },
    "POST /relay": async ({ state, activation, query, call, req }, res) => {
      await bodyLength(req)
      state.n++
      const ns = query.get("ns") ?? activation.namespace
      try {
        const answer = await call(ns, `${activation.id}.r`, "/state")
        await answer.arrayBuffer()
        if (answer.status >= 500) return json(res, answer.status, { error: "relayed", status: answer.status })
        json(res, 200, { worker, id: activation.id, relayed: answer.status })
      } catch (error) {
        json(res, 503, { error: "relay failed", cause: error instanceof Error ? error.message : String(error) })
      }
    }
  },
  webSocket: (socket) => {
    socket.on("message", (data, isBinary) => socket.send(data, { binary: isBinary }))
  }
})

const running = await startWorker({
  pinboard: required("pinboard"),
  token: required("token"),
  worker,
  instances: Object.fromEntries(namespaces.map((ns) => [ns, definition])),
  shutdownGraceMs: 2000,
  // Stdout carries the soak's own lines: the library's JSON lines go to stderr.
  log: (line) => process.stderr.write(`${JSON.stringify(line)}\n`)
})
await running.registered()
process.stdout.write(`soak-worker ${worker} ready on ${running.port}\n`)
