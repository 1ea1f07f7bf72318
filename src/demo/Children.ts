// The demo's child processes: started with their output prefixed by name, stopped in order,
// and, for a worker that dies while the demo runs, started again after a pause.
import { spawn, type ChildProcess } from "node:child_process"
import { dirname, join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { Duration, Effect } from "effect"

const here = dirname(fileURLToPath(import.meta.url))
/** After SIGTERM, a child has this long to exit before it is killed. */
const STOP_GRACE = Duration.seconds(5)

export const log = (line: string) => process.stdout.write(`[demo] ${line}\n`)

export interface Child {
  readonly name: string
  readonly process: ChildProcess
  readonly exited: Promise<void>
}

export interface ChildSpec {
  readonly name: string
  /** Relative to dist/demo/. */
  readonly script: string
  readonly args: ReadonlyArray<string>
  readonly env: NodeJS.ProcessEnv
  readonly onLine?: (line: string) => void
  /** Called when the child exits while the demo is not stopping. */
  readonly onUnexpectedExit: (how: string) => void
}

const children: Array<Child> = []
let stopping = false

export const isStopping = (): boolean => stopping

/** Starts `node <script>`, prefixing each line it prints with its name; replaces an earlier child of that name. */
export const start = (spec: ChildSpec): Child => {
  const child = spawn(process.execPath, [join(here, spec.script), ...spec.args], { env: spec.env, stdio: ["ignore", "pipe", "pipe"] })
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on("line", (line) => {
      process.stdout.write(`[${spec.name}] ${line}\n`)
      spec.onLine?.(line)
    })
  }
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  child.once("exit", (code, signal) => {
    if (!stopping) spec.onUnexpectedExit(signal ?? `code ${code}`)
  })
  log(`started ${spec.name} (pid ${child.pid})`)
  const entry = { name: spec.name, process: child, exited }
  const earlier = children.findIndex((c) => c.name === spec.name)
  if (earlier < 0) children.push(entry)
  else children[earlier] = entry
  return entry
}

/** SIGTERM to each child of `group`, SIGKILL to those still running after the grace period. */
const end = (group: ReadonlyArray<Child>): Effect.Effect<void> => {
  const exited = Effect.promise(() => Promise.all(group.map((c) => c.exited)))
  return Effect.sync(() => {
    for (const child of group) if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill("SIGTERM")
  }).pipe(
    Effect.andThen(exited),
    Effect.timeout(STOP_GRACE),
    Effect.catchTag("TimeoutError", () =>
      Effect.andThen(Effect.sync(() => group.forEach((child) => child.process.kill("SIGKILL"))), exited)
    ),
    Effect.asVoid
  )
}

/** Stops the workers first (so they deregister), then Pinboard, and exits. */
export const stopAll = (exitCode: number): void => {
  if (stopping) return
  stopping = true
  void Effect.runPromise(
    Effect.gen(function* () {
      yield* end(children.filter((c) => c.name !== "pinboard"))
      yield* end(children.filter((c) => c.name === "pinboard"))
      log("stopped")
      process.exit(exitCode)
    })
  )
}
