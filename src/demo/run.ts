// `npm run demo`: Pinboard with the embedded registry and two demo workers, until Ctrl-C.
//
// Starts `node dist/main.js` (token `dev`, port from PORT or 8080, a lease of 5 s unless
// PINBOARD_LEASE_MS says otherwise, affinity on the `x-user` header), then two workers
// (dist/demo/worker.js) on free ports, waits past the registry cold start, and prints curl
// lines that place threads on both workers, a WebSocket watcher line, and a kill line to
// watch failover. A worker that dies is started again once its lease has lapsed.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Duration, Effect, Schedule } from "effect"
import { rendezvousScore } from "../registry/Placement.js"
import { type Child, isStopping, log, start, stopAll } from "./Children.js"

const DEPLOYMENT_TOKEN = "dev"
const WORKERS = ["worker-1", "worker-2"] as const
const AFFINITY_HEADER = "x-user"
const USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
/** A poll not answered in this long counts as not ready. */
const POLL_ANSWER_WITHIN = Duration.seconds(2)
const POLL_AGAIN = Schedule.spaced(Duration.millis(200))

const portFromEnv = (raw: string | undefined): number => {
  if (raw === undefined || raw === "") return 8080
  const port = Number(raw)
  if (/^\d+$/.test(raw.trim()) && port >= 1 && port <= 65535) return port
  process.stderr.write(`[demo] PORT: expected an integer from 1 to 65535, got ${JSON.stringify(raw)}\n`)
  process.exit(2)
}

const pinboardPort = portFromEnv(process.env.PORT)
const leaseMs = process.env.PINBOARD_LEASE_MS ?? "5000"
const pinboardUrl = `http://127.0.0.1:${pinboardPort}`

// The demo's own configuration: placement follows the x-user header instead of the client
// address, so that the printed commands, all sent from one machine, reach both workers.
const configDir = mkdtempSync(join(tmpdir(), "pinboard-demo-"))
const configFile = join(configDir, "pinboard.json")
writeFileSync(configFile, JSON.stringify({ affinity: { key: `header:${AFFINITY_HEADER}` } }))
process.on("exit", () => rmSync(configDir, { recursive: true, force: true }))

/** The first user each worker ranks highest for a new placement (rendezvous hashing, docs/protocol.md "Resolution"). */
const userFor = (worker: string): string =>
  USERS.find((user) => WORKERS.reduce((best, w) => (rendezvousScore(user, w) > rendezvousScore(user, best) ? w : best)) === worker)!

process.on("SIGINT", () => stopAll(0))
process.on("SIGTERM", () => stopAll(0))
// npm forwards Ctrl-C to the demo; should npm itself be killed, the demo is orphaned and stops too.
const parent = process.ppid
setInterval(() => process.ppid !== parent && stopAll(0), 500).unref()

/** Polls until `ready` answers true for a response from `url`. */
const poll = (url: string, ready: (res: Response) => boolean) =>
  Effect.tryPromise(async (signal) => {
    const res = await fetch(url, { signal })
    await res.arrayBuffer()
    return res
  }).pipe(Effect.timeout(POLL_ANSWER_WITHIN), Effect.filterOrFail(ready), Effect.retry(POLL_AGAIN))

// A clean environment for Pinboard: the embedded registry, whatever this shell exports.
const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("PINBOARD_")))

const startPinboard = (): Effect.Effect<void, unknown> => {
  let portTaken = false
  start({
    name: "pinboard",
    script: "../main.js",
    args: ["--config", configFile, "--port", String(pinboardPort)],
    env: { ...env, PINBOARD_TOKEN: DEPLOYMENT_TOKEN, PINBOARD_LEASE_MS: leaseMs },
    onLine: (line) => void (line.includes("the port is in use") && (portTaken = true)),
    onUnexpectedExit: (how) => {
      log(portTaken ? `PORT ${pinboardPort} is taken: set PORT to a free port (PORT=8081 npm run demo)` : `pinboard exited unexpectedly (${how}); stopping`)
      stopAll(portTaken ? 2 : 1)
    }
  })
  return poll(`${pinboardUrl}/healthz`, (res) => res.status === 200)
}

/** Starts a worker and resolves once it has registered; a worker that dies is started again after one lease. */
const startDemoWorker = (worker: string): Effect.Effect<Child> =>
  Effect.callback<Child>((registered) => {
    const args = ["--pinboard", pinboardUrl, "--token", DEPLOYMENT_TOKEN, "--worker", worker, "--port", "0"]
    const child: Child = start({
      name: worker,
      script: "worker.js",
      args,
      env,
      // The library's JSON line (docs/worker.md "Logs").
      onLine: (line) => line.includes('"message":"worker registered"') && registered(Effect.succeed(child)),
      onUnexpectedExit: (how) => {
        const pause = Number(leaseMs) + 1000
        log(`${worker} exited (${how}). Until its lease lapses (${Number(leaseMs) / 1000} s) its threads answer 502 bad gateway;`)
        log(`then they move to the other worker. Ask again with the curl lines above. Starting ${worker} again in ${pause / 1000} s.`)
        setTimeout(() => {
          if (isStopping()) return
          void Effect.runPromise(startDemoWorker(worker)).then((again) => log(`${worker} is back (pid ${again.process.pid}): kill -9 ${again.process.pid}`))
        }, pause)
      }
    })
  })

const main = Effect.gen(function* () {
  yield* startPinboard()
  const workers = yield* Effect.forEach(WORKERS, startDemoWorker, { concurrency: "unbounded" })

  // Every bucket refuses new placements for one lease after the registry's first use.
  log(`waiting for the registry cold start (one lease, ${Number(leaseMs) / 1000} s) to pass...`)
  yield* poll(`${pinboardUrl}/threads/demo/messages`, (res) => res.status !== 503)

  const base = `localhost:${pinboardPort}/threads`
  const [first, second] = [userFor(WORKERS[0]), userFor(WORKERS[1])]
  log("ready. Try:")
  process.stdout.write(`  curl -s -X POST ${base}/t1/messages -H '${AFFINITY_HEADER}: ${first}' -d 'hello'\n`)
  process.stdout.write(`  curl -s -X POST ${base}/t2/messages -H '${AFFINITY_HEADER}: ${second}' -d 'another thread'\n`)
  process.stdout.write(`  curl -s ${base}/t1/messages\n`)
  process.stdout.write(`  curl -s ${base}/t2/messages\n`)
  log(`a new thread goes to the worker its first caller's ${AFFINITY_HEADER} ranks highest (rendezvous hashing):`)
  log(`${first}'s t1 to ${WORKERS[0]}, ${second}'s t2 to ${WORKERS[1]}. Without this demo's affinity setting it would be`)
  log("the client's address, and every thread from this machine would go to one worker. Once placed, a thread")
  log("stays on its worker whoever asks (see \"worker\" and \"epoch\") until the worker's lease lapses.")
  log("in another terminal, to watch t1's new messages over a WebSocket:")
  process.stdout.write(`  node dist/demo/watch.js ws://${base}/t1/stream\n`)
  log(`to watch failover, kill ${WORKERS[0]}, then ask for t1 again:`)
  process.stdout.write(`  kill -9 ${workers[0]!.process.pid}\n`)
  log("t1 comes back from the other worker, at a new epoch, with no messages: this demo keeps them in")
  log("memory (docs/worker.md shows a store that survives). Ctrl-C to stop.")
})

Effect.runPromise(main).catch((error: unknown) => {
  log(`failed: ${error instanceof Error ? error.message : String(error)}`)
  stopAll(1)
})
