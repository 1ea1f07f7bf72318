// A minimal demo worker on node:http (DESIGN 4, 10): registers for /threads, renews its
// lease, deregisters on SIGTERM/SIGINT, and keeps each thread's messages in memory.
// The worker library (a later issue) replaces it; it verifies no attestation.
//
//   node dist/demo/worker.js --pinboard http://127.0.0.1:8080 --token dev --worker w1 --port 0
//
// Each flag falls back to PINBOARD_URL, PINBOARD_TOKEN, WORKER_ID, WORKER_PORT. Port 0 takes
// any free port; the one chosen is the one advertised.
import http, { type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { parseArgs } from "node:util"

const { values: flags } = parseArgs({
  options: { pinboard: { type: "string" }, token: { type: "string" }, worker: { type: "string" }, port: { type: "string" } }
})
const pinboardUrl = (flags.pinboard ?? process.env.PINBOARD_URL ?? "http://127.0.0.1:8080").replace(/\/$/, "")
const token = flags.token ?? process.env.PINBOARD_TOKEN ?? "dev"
const worker = flags.worker ?? process.env.WORKER_ID ?? "demo-worker"
const port = Number(flags.port ?? process.env.WORKER_PORT ?? 0)

const NAMESPACE = "/threads"
const HEADROOM = 100
const RETRY_MS = 1000
const REQUEST_TIMEOUT_MS = 5000

const log = (line: string) => process.stdout.write(`${line}\n`)

// ---- instances: one message list per thread id -------------------------------------------

const threads = new Map<string, Array<string>>()
const MESSAGES = /^\/threads\/([A-Za-z0-9._~-]{1,256})\/messages$/

const readText = async (req: IncomingMessage): Promise<string> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString("utf8")
}

const sendJson = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(`${JSON.stringify(body)}\n`)
}

const serve = async (req: IncomingMessage, res: ServerResponse) => {
  const thread = MESSAGES.exec(new URL(req.url ?? "/", "http://worker").pathname)?.[1]
  if (thread === undefined || (req.method !== "GET" && req.method !== "POST")) {
    return sendJson(res, 404, { error: "not found" })
  }
  const messages = threads.get(thread) ?? []
  threads.set(thread, messages)
  if (req.method === "POST") messages.push(await readText(req))
  sendJson(res, 200, { thread, worker, epoch: req.headers["pinboard-epoch"] ?? null, messages })
}

const server = http.createServer((req, res) => {
  serve(req, res).catch(() => res.destroy())
})

// ---- the lease: register, heartbeat every heartbeatMs, register again on 410 ---------------

let lease: { readonly incarnation: string; readonly heartbeatMs: number } | undefined
let timer: NodeJS.Timeout | undefined
let advertiseUrl = ""

const registry = (method: string, path: string, body?: unknown) =>
  fetch(`${pinboardUrl}/registry${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
  })

const register = async () => {
  const res = await registry("POST", "/workers", { worker, advertiseUrl, namespaces: [NAMESPACE], headroom: HEADROOM })
  if (res.status !== 200) throw new Error(`register answered ${res.status} ${await res.text()}`)
  const answer = (await res.json()) as { incarnation: string; heartbeatMs: number }
  lease = { incarnation: answer.incarnation, heartbeatMs: answer.heartbeatMs }
  log(`registered as ${worker} for ${NAMESPACE} (incarnation ${answer.incarnation}, heartbeat every ${answer.heartbeatMs} ms)`)
}

const heartbeat = async (current: { readonly incarnation: string }) => {
  const res = await registry("POST", `/workers/${worker}/heartbeat`, { incarnation: current.incarnation, headroom: HEADROOM })
  if (res.status === 410) {
    // The lease is gone, so every placement it held may be someone else's now.
    log("lease lost: dropping every thread and registering again")
    threads.clear()
    lease = undefined
    return register()
  }
  if (res.status !== 200) throw new Error(`heartbeat answered ${res.status} ${await res.text()}`)
  await res.arrayBuffer()
}

const tick = async () => {
  try {
    await (lease === undefined ? register() : heartbeat(lease))
  } catch (error) {
    log(`registry call failed (${error instanceof Error ? error.message : String(error)}); retrying`)
  }
  timer = setTimeout(tick, lease?.heartbeatMs ?? RETRY_MS)
}

const shutdown = async (signal: string) => {
  clearTimeout(timer)
  if (lease !== undefined) {
    const res = await registry("DELETE", `/workers/${worker}?incarnation=${encodeURIComponent(lease.incarnation)}`).catch(() => undefined)
    log(res?.status === 204 ? `${signal}: deregistered` : `${signal}: could not deregister (Pinboard gone?)`)
  }
  server.closeAllConnections()
  process.exit(0)
}

let stopping = false
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    if (stopping) return
    stopping = true
    void shutdown(signal)
  })
}

server.listen(port, "127.0.0.1", () => {
  advertiseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  log(`listening on ${advertiseUrl}`)
  void tick()
})
