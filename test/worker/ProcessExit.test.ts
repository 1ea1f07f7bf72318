// A process that uses the worker library exits on its own once its worker has stopped
// (docs/worker.md): `stop()` leaves nothing running, no fiber, timer, socket or server, whatever
// the worker was doing (registered and heartbeating, retrying a registration Pinboard never
// answers, holding activations with background tasks, exporting spans). Real Node processes
// that load the library's sources (type-stripped by Node itself); each exits by itself or,
// after a few seconds, reports what still keeps it alive.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { spawnProcess } from "../support/Processes.js"
import { scaled, within } from "../support/Time.js"

const library = fileURLToPath(new URL("../../src/worker/index.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "pinboard-worker-exit-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

// The sources import each other as `.js`, as tsc resolves them: the `.ts` beside it is loaded.
const hooks = join(dir, "hooks.mjs")
writeFileSync(
  hooks,
  `import { existsSync } from "node:fs"
import { registerHooks } from "node:module"
import { fileURLToPath } from "node:url"
registerHooks({
  resolve(specifier, context, next) {
    if (specifier.startsWith(".") && specifier.endsWith(".js") && context.parentURL?.startsWith("file:")) {
      const ts = new URL(specifier.slice(0, -3) + ".ts", context.parentURL)
      if (existsSync(fileURLToPath(ts))) return next(ts.href, context)
    }
    return next(specifier, context)
  }
})
`
)

/** How long a stopped worker's process may take to exit by itself (nominal, scaled); then it reports what keeps it. */
const EXIT_WITHIN_MS = 5_000
/** Each test starts a Node process that type-strips and loads the library's sources: seconds on a busy machine (nominal). */
const PROCESS_MS = 60_000

/**
 * Runs `body` in a fresh Node process, after `startWorker` and `defineInstance` are imported
 * from the library's sources, and `registry` is a registry client that answers at once.
 */
const run = async (name: string, body: string) => {
  const script = join(dir, `${name}.mjs`)
  writeFileSync(
    script,
    `const { defineInstance, startWorker } = await import(${JSON.stringify(library)})
const registry = {
  register: async () => ({ incarnation: "inc-1", leaseMs: 3000, heartbeatMs: 1000, unrenewed: [] }),
  heartbeat: async () => ({ _tag: "Renewed", windDown: [], unrenewed: [] }),
  release: async () => true,
  deregister: async () => {}
}
const counter = defineInstance({ activate: () => ({ count: 0 }) })
/** Once the worker has stopped: a process still alive after the grace says what keeps it. */
const stopped = () => {
  console.log("stop returned")
  setTimeout(() => {
    console.log("still alive: " + JSON.stringify(process.getActiveResourcesInfo()))
    process.exit(3)
  }, ${scaled(EXIT_WITHIN_MS)}).unref()
}
${body}
`
  )
  const child = spawnProcess(process.execPath, ["--experimental-transform-types", "--no-warnings", "--import", hooks, script], {}, { name })
  try {
    const exit = await within(child.exited, PROCESS_MS - 5_000, `${name}: the process to exit`)
    return { exit, lines: child.lines }
  } finally {
    await child.kill()
  }
}

describe("a process using the worker library", () => {
  /** stop() returned, nothing held the process open past it, and it exited 0 by itself. */
  const expectStoppedAndExited = ({ exit, lines }: { exit: unknown; lines: ReadonlyArray<string> }): void => {
    expect(lines).toContain("stop returned")
    expect(lines.filter((line) => line.startsWith("still alive"))).toEqual([])
    expect(exit).toEqual({ code: 0, signal: null })
  }

  it("exits by itself once stop() has returned: registered, heartbeating, activations with background tasks", async () => {
    const { exit, lines } = await run(
      "registered",
      `const worker = await startWorker({ pinboard: "http://127.0.0.1:1", token: "t", worker: "w1", instances: { "/counters": counter }, registry, log: () => {} })
await worker.registered()
for (const id of ["c1", "c2"]) {
  const activation = await worker.activations.enter({ env: "", namespace: "/counters", id, epoch: "1", hostname: undefined }, () => true)
  activation.context.background((signal) => new Promise((resolve) => signal.addEventListener("abort", resolve)))
  worker.activations.leave(activation)
}
// A heartbeat or two on the real clock.
await new Promise((resolve) => setTimeout(resolve, 1200))
await worker.stop()
console.log("activations: " + worker.activations.size)
stopped()`
    )
    expect(lines).toContain("activations: 0")
    expectStoppedAndExited({ exit, lines })
  }, scaled(PROCESS_MS))

  it("exits by itself once stop() has returned while the registration was still being retried", async () => {
    // The registry API at a port nobody listens on: every registration fails, and is retried.
    const { exit, lines } = await run(
      "unregistered",
      `const worker = await startWorker({ pinboard: "http://127.0.0.1:1", token: "t", worker: "w1", instances: { "/counters": counter }, log: (line) => line.message.startsWith("register failed") && console.log("register failed") })
await new Promise((resolve) => setTimeout(resolve, 500))
await worker.stop()
stopped()`
    )
    expect(lines).toContain("register failed")
    expectStoppedAndExited({ exit, lines })
  }, scaled(PROCESS_MS))

  it("exits by itself once stop() has returned, with traces exported to a collector that is not there", async () => {
    const { exit, lines } = await run(
      "traced",
      `const worker = await startWorker({ pinboard: "http://127.0.0.1:1", token: "t", worker: "w1", instances: { "/counters": counter }, registry, log: () => {}, traces: { endpoint: "http://127.0.0.1:1" } })
await worker.registered()
await worker.stop()
stopped()`
    )
    expectStoppedAndExited({ exit, lines })
  }, scaled(PROCESS_MS))

  it("keeps running while its worker serves, and stops and exits 0 on SIGTERM", async () => {
    const script = join(dir, "served.mjs")
    writeFileSync(
      script,
      `const { defineInstance, startWorker } = await import(${JSON.stringify(library)})
const registry = {
  register: async () => ({ incarnation: "inc-1", leaseMs: 3000, heartbeatMs: 1000, unrenewed: [] }),
  heartbeat: async () => ({ _tag: "Renewed", windDown: [], unrenewed: [] }),
  release: async () => true,
  deregister: async () => {}
}
const worker = await startWorker({ pinboard: "http://127.0.0.1:1", token: "t", worker: "w1", instances: { "/counters": defineInstance({ activate: () => ({}) }) }, registry })
await worker.registered()
console.log("ready")
`
    )
    const child = spawnProcess(process.execPath, ["--experimental-transform-types", "--no-warnings", "--import", hooks, script], {}, { name: "served" })
    try {
      await child.waitForLine(/^ready$/, 30_000)
      // Nothing ends it but a signal: a few heartbeats on, it still serves.
      await new Promise((resolve) => setTimeout(resolve, scaled(1500)))
      expect(child.alive()).toBe(true)
      child.child.kill("SIGTERM")
      expect(await child.exited).toEqual({ code: 0, signal: null })
      expect(child.lines.some((line) => line.includes('"message":"worker stopped"'))).toBe(true)
    } finally {
      await child.kill()
    }
  }, scaled(PROCESS_MS))
})
