// A demo worker built on the worker library (docs/worker.md): hosts /threads, where each
// thread keeps its messages in memory.
//   POST /threads/{id}/messages   appends the body as a message
//   GET  /threads/{id}/messages   lists them
//   WS   /threads/{id}/stream     sends each new message as it is posted
//
//   node dist/demo/worker.js --pinboard http://127.0.0.1:8080 --token dev --worker w1 --port 0
//
// Each flag falls back to PINBOARD_URL, PINBOARD_TOKEN, WORKER_ID, WORKER_PORT. Port 0 takes
// any free port; the one chosen is the one advertised.
import type { IncomingMessage, ServerResponse } from "node:http"
import { parseArgs } from "node:util"
import type { WebSocket } from "ws"
import { defineInstance, startWorker } from "../worker/index.js"

const { values: flags } = parseArgs({
  options: { pinboard: { type: "string" }, token: { type: "string" }, worker: { type: "string" }, port: { type: "string" } }
})
const pinboard = flags.pinboard ?? process.env.PINBOARD_URL ?? "http://127.0.0.1:8080"
const token = flags.token ?? process.env.PINBOARD_TOKEN ?? "dev"
const worker = flags.worker ?? process.env.WORKER_ID ?? "demo-worker"
const port = Number(flags.port ?? process.env.WORKER_PORT ?? 0)

const say = (line: string) => process.stdout.write(`${line}\n`)

const readText = async (req: IncomingMessage): Promise<string> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString("utf8")
}

const sendJson = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(`${JSON.stringify(body)}\n`)
}

interface Thread {
  readonly messages: Array<string>
  readonly watchers: Set<WebSocket>
}

const thread = defineInstance<Thread>({
  activate: ({ id, epoch }) => {
    say(`thread ${id} activated at epoch ${epoch}`)
    return { messages: [], watchers: new Set() }
  },
  deactivate: (_state, reason, { id }) => say(`thread ${id} deactivated (${reason})`),
  routes: {
    "GET /messages": ({ state, activation }, res) =>
      sendJson(res, 200, { thread: activation.id, worker, epoch: activation.epoch, messages: state.messages }),
    "POST /messages": async ({ state, activation, req }, res) => {
      const message = await readText(req)
      state.messages.push(message)
      for (const watcher of state.watchers) watcher.send(message)
      sendJson(res, 200, { thread: activation.id, worker, epoch: activation.epoch, messages: state.messages })
    }
  },
  webSocket: (socket, { state, path }) => {
    if (path !== "/stream") return socket.close(4004, "only /stream")
    state.watchers.add(socket)
    socket.on("close", () => state.watchers.delete(socket))
  }
})

// The library logs its own start and stop (`worker listening`, `worker registered`, ...,
// `worker stopped`: docs/worker.md "Logs"), and stops gracefully on SIGTERM and SIGINT.
const running = await startWorker({ pinboard, token, worker, port, instances: { "/threads": thread } })
await running.registered()
