// `npm run demo`: Pinboard with the embedded registry and two demo workers, until Ctrl-C.
//
// Starts `node dist/main.js` (token `dev`, port from PORT or 8080; PINBOARD_LEASE_MS is
// passed through), then two workers (dist/demo/worker.js) on free ports, waits past the
// registry cold start, and prints curl lines and a WebSocket watcher line to try.
import { spawn, type ChildProcess } from "node:child_process"
import { dirname, join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
const port = Number(process.env.PORT ?? 8080)
const pinboardUrl = `http://127.0.0.1:${port}`
const TOKEN = "dev"
const WORKERS = ["worker-1", "worker-2"]
const STOP_GRACE_MS = 5000

const log = (line: string) => process.stdout.write(`[demo] ${line}\n`)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface Child {
  readonly name: string
  readonly process: ChildProcess
  readonly exited: Promise<void>
}

const children: Array<Child> = []
let stopping = false

/** Starts `node <script>`, prefixing each line it prints with its name. */
const start = (name: string, script: string, args: Array<string>, env: NodeJS.ProcessEnv, onLine?: (line: string) => void): Child => {
  const child = spawn(process.execPath, [join(here, script), ...args], { env, stdio: ["ignore", "pipe", "pipe"] })
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on("line", (line) => {
      process.stdout.write(`[${name}] ${line}\n`)
      onLine?.(line)
    })
  }
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  child.once("exit", (code, signal) => {
    if (stopping) return
    log(`${name} exited unexpectedly (${signal ?? `code ${code}`}); stopping`)
    void stop(1)
  })
  log(`started ${name} (pid ${child.pid})`)
  const entry = { name, process: child, exited }
  children.push(entry)
  return entry
}

/** Stops the workers first (so they deregister), then Pinboard; SIGKILL after a grace period. */
const stop = async (exitCode: number) => {
  if (stopping) return
  stopping = true
  const end = async (group: Array<Child>) => {
    for (const child of group) if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill("SIGTERM")
    const all = Promise.all(group.map((c) => c.exited))
    const timedOut = await Promise.race([all.then(() => false), sleep(STOP_GRACE_MS).then(() => true)])
    if (timedOut) for (const child of group) child.process.kill("SIGKILL")
    await all
  }
  await end(children.filter((c) => c.name !== "pinboard"))
  await end(children.filter((c) => c.name === "pinboard"))
  log("stopped")
  process.exit(exitCode)
}

process.on("SIGINT", () => void stop(0))
process.on("SIGTERM", () => void stop(0))

/** Polls until `ready` answers true for a response from `url`. */
const poll = async (url: string, ready: (res: Response) => boolean) => {
  for (;;) {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) }).catch(() => undefined)
    await res?.arrayBuffer()
    if (res !== undefined && ready(res)) return
    await sleep(200)
  }
}

const main = async () => {
  // A clean environment for Pinboard: the embedded registry, whatever this shell exports.
  const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("PINBOARD_")))
  const leaseMs = process.env.PINBOARD_LEASE_MS
  start("pinboard", "../main.js", [], {
    ...env,
    PINBOARD_TOKEN: TOKEN,
    PINBOARD_PORT: String(port),
    ...(leaseMs === undefined ? {} : { PINBOARD_LEASE_MS: leaseMs })
  })
  await poll(`${pinboardUrl}/healthz`, (res) => res.status === 200)

  await Promise.all(
    WORKERS.map(
      (worker) =>
        new Promise<void>((registered) => {
          const args = ["--pinboard", pinboardUrl, "--token", TOKEN, "--worker", worker, "--port", "0"]
          start(worker, "worker.js", args, env, (line) => line.startsWith("registered") && registered())
        })
    )
  )

  // Every bucket refuses new placements for one lease after the registry's first use.
  log(`waiting for the registry cold start (one lease, ${Number(leaseMs ?? 15000) / 1000} s) to pass...`)
  await poll(`${pinboardUrl}/threads/demo/messages`, (res) => res.status !== 503)

  const base = `localhost:${port}/threads`
  log("ready. Try:")
  process.stdout.write(`  curl -s -X POST ${base}/t1/messages -d 'hello'\n`)
  process.stdout.write(`  curl -s ${base}/t1/messages\n`)
  process.stdout.write(`  curl -s -X POST ${base}/t2/messages -d 'another thread'\n`)
  process.stdout.write(`  curl -s ${base}/t2/messages\n`)
  log("and in another terminal, to watch t1's new messages over a WebSocket:")
  process.stdout.write(`  node dist/demo/watch.js ws://${base}/t1/stream\n`)
  log("each thread stays on one worker (see \"worker\" and \"epoch\"). Ctrl-C to stop.")
}

main().catch((error) => {
  log(`failed: ${error instanceof Error ? error.message : String(error)}`)
  void stop(1)
})
