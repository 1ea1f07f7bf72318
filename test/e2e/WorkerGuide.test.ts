// docs/worker.md followed from a fresh clone: the checkout built by `npm pack` (its `prepare`
// script), the tarball installed in a new ES module project, the counter example written
// exactly as the guide shows it (the code block is read from the guide, so the two cannot
// drift) and type-checked, Pinboard and the worker (Node running counter.ts as it is) started
// with the guide's commands, the cold start met, then the counter's answers (405 with Allow,
// HEAD from GET included), and both processes stopped by SIGINT (Ctrl-C) with their JSON log
// lines. Every command the test runs is checked to appear in the guide word for word.
//
// What it does not follow literally: the clone is of the current commit (uncommitted changes
// are not in it), and its `npm ci` is the repository's own node_modules linked in (the same
// lock file; a real `npm ci` costs a minute more). The app's install reaches the npm registry.
import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, describe, expect, it } from "vitest"
import { freePort, killPid, spawnProcess, type Spawned } from "../support/Processes.js"
import { poll, scaled } from "../support/Time.js"

const run = promisify(execFile)
const root = fileURLToPath(new URL("../..", import.meta.url))
const guide = readFileSync(join(root, "docs/worker.md"), "utf8")
const TOKEN = "dev-token"
/**
 * The guide's 2 s lease, stretched on a slow machine: the cold start must still be running
 * when the first request, sent right after the registration's log line, arrives.
 */
const LEASE_MS = scaled(2000)

/** The guide's `counter.ts` block, as it stands. */
const counterSource = (): string => {
  const block = /```ts\n(\/\/ counter\.ts\n[\s\S]*?)```/.exec(guide)
  if (block === null) throw new Error("docs/worker.md has no ```ts block starting with // counter.ts")
  return block[1]!
}

/** Fails unless the guide shows `command` as it is run here. */
const documented = (command: string): string => {
  expect(guide, `docs/worker.md shows \`${command}\``).toContain(command)
  return command
}

/** A shell command of the guide, in `cwd`; its output is returned for failures to show. */
const sh = async (cwd: string, command: string, timeoutMs: number) => {
  const started = performance.now()
  const { stdout, stderr } = await run("sh", ["-c", documented(command)], { cwd, timeout: scaled(timeoutMs), maxBuffer: 16 << 20 })
  return { output: `${stdout}${stderr}`, ms: Math.round(performance.now() - started) }
}

interface LogLine {
  readonly time: string
  readonly level: string
  readonly message: string
  readonly [field: string]: unknown
}

const jsonLines = (process: Spawned): Array<LogLine> =>
  process.lines.flatMap((line) => (line.startsWith("{") ? [JSON.parse(line) as LogLine] : []))

const waitForMessage = (process: Spawned, message: string, timeoutMs: number) =>
  process.waitForLine(new RegExp(`"message":"${message.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}"`), timeoutMs)

const dir = mkdtempSync(join(tmpdir(), "pinboard-guide-"))
const spawned: Array<Spawned> = []

afterAll(async () => {
  // Each runs in a process group of its own (Pinboard's: npx, then node): the group goes.
  for (const process of spawned) {
    if (process.alive()) killPid(-process.pid, "SIGKILL")
    await process.exited
  }
  rmSync(dir, { recursive: true, force: true })
})

/** `command` (a line of the guide) in its own process group, with `env` added. */
const start = (cwd: string, command: string, env: Record<string, string>): Spawned => {
  const [file, ...args] = documented(command).replace(/^(\w+=\S+ )+/, "").split(" ")
  // The test run's own PINBOARD_* settings (PINBOARD_TEST_TIME_SCALE...) are no Pinboard's: it would exit 2 on them.
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("PINBOARD_")))
  const child = spawnProcess(file!, args, { cwd, detached: true, env: { ...clean, ...env } }, { name: command })
  spawned.push(child)
  return child
}

describe("docs/worker.md, followed from a fresh clone", () => {
  it(
    "builds, installs, runs the counter example behind Pinboard: the cold start, then its answers; both stop with their log lines",
    async () => {
      const timings: Record<string, number> = {}
      await run("git", ["clone", "--quiet", root, join(dir, "pinboard")])
      symlinkSync(join(root, "node_modules"), join(dir, "pinboard", "node_modules"))
      documented("npm ci          # installs its dependencies, then builds dist/ (prepare)")
      timings["npm pack (builds)"] = (await sh(join(dir, "pinboard"), "npm pack", 120_000)).ms

      const app = join(dir, "counter")
      timings["app set-up"] = (await sh(dir, "mkdir counter && cd counter", 5_000)).ms
      timings["npm init"] = (await sh(app, "npm init -y && npm pkg set type=module", 30_000)).ms
      timings["npm install"] = (await sh(app, "npm install ../pinboard/pinboard-0.1.0.tgz", 120_000)).ms
      expect(guide).toContain("Save this as `counter.ts`")
      writeFileSync(join(app, "counter.ts"), counterSource())

      // The types the library's declarations name (node's, ws') come with the package.
      expect(existsSync(join(app, "node_modules", "@types", "ws")), "@types/ws installed with pinboard").toBe(true)
      expect(existsSync(join(app, "node_modules", "@types", "node")), "@types/node installed with pinboard").toBe(true)
      // The guide's TypeScript type-checks (strict, nodenext) with the app's own types and the checkout's tsc.
      const tscStarted = performance.now()
      await run(
        join(dir, "pinboard", "node_modules", ".bin", "tsc"),
        ["--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", "--skipLibCheck", "--types", "node", "counter.ts"],
        { cwd: app, timeout: scaled(60_000) }
      ).catch((error: { stdout?: string }) => {
        throw new Error(`counter.ts does not type-check:\n${error.stdout ?? String(error)}`)
      })
      timings["tsc"] = Math.round(performance.now() - tscStarted)

      const [pinboardPort, workerPort] = [await freePort(), await freePort()]
      const runStarted = performance.now()
      const pinboard = start(app, "PINBOARD_TOKEN=dev-token PINBOARD_LEASE_MS=2000 npx pinboard", {
        PINBOARD_TOKEN: TOKEN,
        PINBOARD_LEASE_MS: String(LEASE_MS),
        PINBOARD_PORT: String(pinboardPort),
        PINBOARD_HOST: "127.0.0.1"
      })
      await waitForMessage(pinboard, `pinboard listening on http://127.0.0.1:${pinboardPort}`, 20_000)
      const worker = start(app, "PINBOARD_TOKEN=dev-token node counter.ts", {
        PINBOARD_TOKEN: TOKEN,
        PINBOARD_URL: `http://127.0.0.1:${pinboardPort}`,
        WORKER_PORT: String(workerPort)
      })
      await waitForMessage(worker, "worker registered", 20_000)
      const base = `http://127.0.0.1:${pinboardPort}`

      // The first request meets the cold start: 503, Retry-After, the catalogue's body.
      documented("curl -i -X POST http://localhost:8080/counters/c42/increment")
      const cold = await fetch(`${base}/counters/c42/increment`, { method: "POST" })
      expect(cold.status).toBe(503)
      expect(await cold.text()).toBe('{"error":"registry cold start, retry"}')
      const retryAfter = Number(cold.headers.get("retry-after"))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(Math.ceil(LEASE_MS / 1000))

      // Then, retried, the answers the guide shows.
      const first = await poll(
        async () => {
          const res = await fetch(`${base}/counters/c42/increment`, { method: "POST" })
          const body = await res.text()
          if (res.status === 200) return body
          expect([res.status, body]).toEqual([503, '{"error":"registry cold start, retry"}'])
          return undefined
        },
        { timeoutMs: LEASE_MS + 5_000, reason: "the cold start to end", everyMs: 100 }
      )
      expect(first).toBe("1")
      documented("curl -X POST http://localhost:8080/counters/c42/increment     # 1, then 2, ...")
      expect(await (await fetch(`${base}/counters/c42/increment`, { method: "POST" })).text()).toBe("2")
      documented("curl http://localhost:8080/counters/c42/                      # the count so far")
      const get = await fetch(`${base}/counters/c42/`)
      expect([get.status, await get.text(), get.headers.get("content-length")]).toEqual([200, "2", "1"])
      const head = await fetch(`${base}/counters/c42/`, { method: "HEAD" })
      expect([head.status, await head.text(), head.headers.get("content-length")]).toEqual([200, "", "1"])
      documented("curl -i http://localhost:8080/counters/c42/increment          # 405, Allow: POST")
      const wrongMethod = await fetch(`${base}/counters/c42/increment`)
      expect([wrongMethod.status, wrongMethod.headers.get("allow"), await wrongMethod.text()]).toEqual([405, "POST", '{"error":"method not allowed"}'])
      timings["run: start to answers"] = Math.round(performance.now() - runStarted)

      // Ctrl-C, as a terminal sends it: SIGINT to the whole process group (the worker's node;
      // Pinboard's npx and node); each stops gracefully and says so.
      documented("Ctrl-C\nstops either process gracefully")
      killPid(-worker.pid, "SIGINT")
      await waitForMessage(worker, "worker stopped", 20_000)
      await worker.exited
      killPid(-pinboard.pid, "SIGINT")
      await waitForMessage(pinboard, "pinboard stopped", 20_000)
      // npx ends by the signal it was sent (npm re-raises it) once Pinboard has exited.
      await pinboard.exited

      // Both wrote Pinboard's JSON lines: time, level and message first.
      const workerLines = jsonLines(worker)
      const pinboardLines = jsonLines(pinboard)
      for (const line of [...workerLines, ...pinboardLines]) expect(Object.keys(line).slice(0, 3)).toEqual(["time", "level", "message"])
      expect(workerLines.map((line) => line.message)).toEqual([
        `worker listening on http://127.0.0.1:${workerPort}`,
        "worker registered",
        "worker draining",
        "worker deregistered",
        "worker stopped"
      ])
      expect(workerLines.every((line) => line.worker === "counter-1")).toBe(true)
      expect(pinboardLines.map((line) => line.message).slice(-2)).toEqual(["pinboard draining", "pinboard stopped"])
      console.log(`worker guide timings (ms): ${JSON.stringify(timings)}`)
    },
    scaled(300_000)
  )
})
