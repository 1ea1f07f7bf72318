// `npm run demo`: Pinboard with the embedded registry and two demo workers, until Ctrl-C.
//
// Starts `node dist/main.js` (token `dev`, port from PORT or 8080; PINBOARD_LEASE_MS is
// passed through), then two workers (dist/demo/worker.js) on free ports, waits past the
// registry cold start, and prints curl lines and a WebSocket watcher line to try.
import { spawn, type ChildProcess } from "node:child_process"
import { dirname, join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { Duration, Effect, Schedule } from "effect"

const here = dirname(fileURLToPath(import.meta.url))
const port = Number(process.env.PORT ?? 8080)
const pinboardUrl = `http://127.0.0.1:${port}`
const TOKEN = "dev"
const WORKERS = ["worker-1", "worker-2"]
/** After SIGTERM, a child has this long to exit before it is killed. */
const STOP_GRACE = Duration.seconds(5)
/** A poll not answered in this long counts as not ready. */
const POLL_ANSWER_WITHIN = Duration.seconds(2)
const POLL_AGAIN = Schedule.spaced(Duration.millis(200))

const log = (line: string) => process.stdout.write(`[demo] ${line}\n`)

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
    stopNow(1)
  })
  log(`started ${name} (pid ${child.pid})`)
  const entry = { name, process: child, exited }
  children.push(entry)
  return entry
}

/** SIGTERM to each child of `group`, SIGKILL to those still running after the grace period. */
const end = (group: Array<Child>): Effect.Effect<void> => {
  const exited = Effect.promise(() => Promise.all(group.map((c) => c.exited)))
  return Effect.sync(() => {
    for (const child of group) if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill("SIGTERM")
  }).pipe(
    Effect.zipRight(exited),
    Effect.timeout(STOP_GRACE),
    Effect.catchTag("TimeoutException", () =>
      Effect.zipRight(Effect.sync(() => group.forEach((child) => child.process.kill("SIGKILL"))), exited)
    ),
    Effect.asVoid
  )
}

/** Stops the workers first (so they deregister), then Pinboard, and exits. */
const stop = (exitCode: number): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (stopping) return Effect.void
    stopping = true
    return Effect.gen(function* () {
      yield* end(children.filter((c) => c.name !== "pinboard"))
      yield* end(children.filter((c) => c.name === "pinboard"))
      log("stopped")
      process.exit(exitCode)
    })
  })

const stopNow = (exitCode: number) => void Effect.runPromise(stop(exitCode))

process.on("SIGINT", () => stopNow(0))
process.on("SIGTERM", () => stopNow(0))

/** Polls until `ready` answers true for a response from `url`. */
const poll = (url: string, ready: (res: Response) => boolean) =>
  Effect.tryPromise(async (signal) => {
    const res = await fetch(url, { signal })
    await res.arrayBuffer()
    return res
  }).pipe(Effect.timeout(POLL_ANSWER_WITHIN), Effect.filterOrFail(ready), Effect.retry(POLL_AGAIN))

const main = Effect.gen(function* () {
  // A clean environment for Pinboard: the embedded registry, whatever this shell exports.
  const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("PINBOARD_")))
  const leaseMs = process.env.PINBOARD_LEASE_MS
  start("pinboard", "../main.js", [], {
    ...env,
    PINBOARD_TOKEN: TOKEN,
    PINBOARD_PORT: String(port),
    ...(leaseMs === undefined ? {} : { PINBOARD_LEASE_MS: leaseMs })
  })
  yield* poll(`${pinboardUrl}/healthz`, (res) => res.status === 200)

  yield* Effect.forEach(
    WORKERS,
    (worker) =>
      Effect.async<void>((registered) => {
        const args = ["--pinboard", pinboardUrl, "--token", TOKEN, "--worker", worker, "--port", "0"]
        // The library's JSON line (docs/worker.md "Logs").
        start(worker, "worker.js", args, env, (line) => line.includes('"message":"worker registered"') && registered(Effect.void))
      }),
    { concurrency: "unbounded", discard: true }
  )

  // Every bucket refuses new placements for one lease after the registry's first use.
  log(`waiting for the registry cold start (one lease, ${Number(leaseMs ?? 15000) / 1000} s) to pass...`)
  yield* poll(`${pinboardUrl}/threads/demo/messages`, (res) => res.status !== 503)

  const base = `localhost:${port}/threads`
  log("ready. Try:")
  process.stdout.write(`  curl -s -X POST ${base}/t1/messages -d 'hello'\n`)
  process.stdout.write(`  curl -s ${base}/t1/messages\n`)
  process.stdout.write(`  curl -s -X POST ${base}/t2/messages -d 'another thread'\n`)
  process.stdout.write(`  curl -s ${base}/t2/messages\n`)
  log("and in another terminal, to watch t1's new messages over a WebSocket:")
  process.stdout.write(`  node dist/demo/watch.js ws://${base}/t1/stream\n`)
  log("each thread stays on one worker (see \"worker\" and \"epoch\"). Ctrl-C to stop.")
})

Effect.runPromise(main).catch((error: unknown) => {
  log(`failed: ${error instanceof Error ? error.message : String(error)}`)
  stopNow(1)
})
