// The chaos run's worker: a counter instance on the worker library whose every increment is
// an epoch-fenced write (FencedStore on the storage Redis, which the faults leave alone).
// Every activation, delivery and accepted write is appended to this worker's log before the
// client is answered, for the audit.
//
//   node dist-bench/reliability/chaos/counterWorker.js '<WorkerSpec JSON>'
//
// SIGUSR1 closes the listening port for `portClosedMs` while the lease goes on (a worker whose
// port is gone but which stays registered); SIGTERM stops it gracefully.
import { appendFileSync } from "node:fs"
import type { IncomingMessage, ServerResponse } from "node:http"
import { Redis } from "ioredis"
import { defineInstance, FencedStore, StaleEpochError, startWorker } from "../../src/worker/index.js"
import type { WorkerEvent } from "./audit.js"

export interface WorkerSpec {
  readonly worker: string
  /** Where registry calls go: a link the chaos run can cut (heartbeats dropped). */
  readonly registry: string
  readonly token: string
  readonly storageUrl: string
  readonly logFile: string
  readonly port: number
  readonly idleMs: number
  readonly portClosedMs: number
}

const spec = JSON.parse(process.argv[2] ?? "") as WorkerSpec
const log = (event: WorkerEvent) => appendFileSync(spec.logFile, `${JSON.stringify(event)}\n`)
const store = new FencedStore(new Redis(spec.storageUrl, { maxRetriesPerRequest: 2 }), { prefix: "chaos" })

const readText = async (req: IncomingMessage): Promise<string> => {
  let text = ""
  for await (const chunk of req) text += String(chunk)
  return text
}

const reply = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify(body))
}

interface Counter {
  /** The value last stored: an increment counts only once its write is accepted. */
  count: number
  /** A newer activation claimed the id before this one could: it must not serve. */
  readonly stale: boolean
  /** Increments of one activation run one after another. */
  turn: Promise<unknown>
}

const counter = defineInstance<Counter>({
  activate: async ({ namespace, id, epoch }) => {
    try {
      const stored = await store.claim(`${namespace}/${id}`, epoch)
      const count = stored === undefined ? 0 : Number(stored.toString())
      log({ t: Date.now(), worker: spec.worker, ev: "activate", id, epoch, value: count })
      return { count, stale: false, turn: Promise.resolve() }
    } catch (error) {
      if (!(error instanceof StaleEpochError)) throw error
      log({ t: Date.now(), worker: spec.worker, ev: "stale", id, epoch })
      return { count: 0, stale: true, turn: Promise.resolve() }
    }
  },
  deactivate: (_state, reason, { id, epoch }) => log({ t: Date.now(), worker: spec.worker, ev: "deactivate", id, epoch, reason }),
  routes: {
    "POST /increment": async ({ state, activation, req }, res) => {
      const op = await readText(req)
      const { namespace, id, epoch } = activation
      log({ t: Date.now(), worker: spec.worker, ev: "deliver", id, epoch, op })
      if (state.stale) return reply(res, 409, { error: "stale epoch" })
      const increment = async () => {
        const value = state.count + 1
        try {
          await store.write(`${namespace}/${id}`, String(value), epoch)
        } catch (error) {
          if (!(error instanceof StaleEpochError)) return reply(res, 503, { error: "storage unavailable" })
          log({ t: Date.now(), worker: spec.worker, ev: "stale", id, epoch })
          return reply(res, 409, { error: "stale epoch" })
        }
        state.count = value
        log({ t: Date.now(), worker: spec.worker, ev: "write", id, epoch, value, op })
        reply(res, 200, { value, epoch, worker: spec.worker })
      }
      const mine = state.turn.then(increment)
      state.turn = mine
      await mine
    },
    "GET /value": ({ state, activation }, res) =>
      state.stale ? reply(res, 409, { error: "stale epoch" }) : reply(res, 200, { value: state.count, epoch: activation.epoch, worker: spec.worker })
  },
  idleTimeoutMs: spec.idleMs
})

const running = await startWorker({
  pinboard: spec.registry,
  token: spec.token,
  worker: spec.worker,
  port: spec.port,
  instances: { "/counters": counter },
  headroom: () => 100,
  log: () => {}
})
process.stdout.write(`worker ${spec.worker} listening on ${running.port}\n`)

process.on("SIGUSR1", () => {
  running.server.close()
  running.server.closeAllConnections()
  setTimeout(() => running.server.listen(running.port, "127.0.0.1"), spec.portClosedMs)
})
