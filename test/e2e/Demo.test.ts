// `npm run demo` end to end: the built demo (Pinboard, embedded registry, two workers) as a
// real process tree; the curl lines it prints are performed as printed, then it is stopped
// by SIGTERM and must exit 0 leaving no process behind.
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
import { freePort, isAlive, killPid, spawnProcess, waitForPidGone, type Spawned } from "../support/Processes.js"
import { scaled } from "../support/Time.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
const LEASE_MS = 2000

interface Printed {
  readonly method: string
  readonly url: string
  readonly body: string | undefined
}

/** `curl -s [-X METHOD] host:port/path [-d 'body']` as the demo prints it. */
const CURL = /^\s*curl -s (?:-X (\w+) )?(\S+)(?: -d '([^']*)')?\s*$/
const parseCurl = (line: string): Printed => {
  const match = CURL.exec(line)
  if (match === null) throw new Error(`not a curl line the test understands: ${line}`)
  return { method: match[1] ?? "GET", url: `http://${match[2]}`, body: match[3] }
}

const perform = async (request: Printed) => {
  const res = await fetch(request.url, { method: request.method, ...(request.body === undefined ? {} : { body: request.body }) })
  return { status: res.status, json: (await res.json()) as { thread: string; worker: string; epoch: string; messages: Array<string> } }
}

let demo: Spawned | undefined
let childPids: Array<number> = []

afterEach(async () => {
  await demo?.kill()
  for (const pid of childPids) killPid(pid, "SIGKILL")
  demo = undefined
  childPids = []
})

describe("npm run demo", () => {
  it("prints curl lines that work, keeps each thread on one worker, and stops cleanly on SIGTERM", async () => {
    if (!existsSync(`${root}/dist/main.js`) || !existsSync(`${root}/dist/demo/run.js`)) {
      throw new Error("dist/main.js or dist/demo/run.js is missing: run `npm run build` before the end-to-end tests")
    }
    const port = await freePort()
    demo = spawnProcess(process.execPath, ["dist/demo/run.js"], {
      cwd: root,
      env: { ...process.env, PORT: String(port), PINBOARD_LEASE_MS: String(LEASE_MS) }
    })

    const postLine = await demo.waitForLine(new RegExp(`curl -s -X POST localhost:${port}/threads/t1/messages -d 'hello'`), 30_000)
    const getLine = await demo.waitForLine(new RegExp(`curl -s localhost:${port}/threads/t1/messages$`), 1_000)
    const watchLine = await demo.waitForLine(new RegExp(`node dist/demo/watch.js ws://localhost:${port}/threads/t1/stream$`), 1_000)
    expect(demo.lines.some((line) => line.includes("waiting for the registry cold start"))).toBe(true)
    childPids = demo.lines.flatMap((line) => {
      const started = /started (pinboard|worker-\d) \(pid (\d+)\)/.exec(line)
      return started ? [Number(started[2])] : []
    })
    expect(childPids).toHaveLength(3)

    // The printed lines, as printed: the watcher first, so that it sees the message posted.
    const [command, ...args] = watchLine.input!.trim().split(/\s+/)
    expect(command).toBe("node")
    const watcher = spawnProcess(process.execPath, args, { cwd: root })
    await watcher.waitForLine(/^watching /, 10_000)
    const posted = await perform(parseCurl(postLine.input!))
    await watcher.waitForLine(/^hello$/, 5_000)
    await watcher.kill()
    expect(posted.status).toBe(200)
    const got = await perform(parseCurl(getLine.input!))
    expect(got.status).toBe(200)
    expect(got.json).toMatchObject({ thread: "t1", messages: ["hello"], worker: posted.json.worker })
    expect(got.json.epoch).toMatch(/^[0-9]+$/)
    expect(got.json.epoch).toBe(posted.json.epoch)

    // Several threads, several rounds: each thread answers from one worker at one epoch.
    const threads = ["a", "b", "c", "d", "e", "f", "g", "h"]
    const owners = new Map<string, { worker: string; epoch: string }>()
    for (const round of [1, 2, 3]) {
      for (const thread of threads) {
        const url = `http://localhost:${port}/threads/${thread}/messages`
        const { status, json } = await perform({ method: "POST", url, body: `${thread}-${round}` })
        expect(status).toBe(200)
        const owner = owners.get(thread) ?? { worker: json.worker, epoch: json.epoch }
        owners.set(thread, owner)
        expect(json).toMatchObject({ thread, ...owner })
        expect(json.messages).toEqual(Array.from({ length: round }, (_, i) => `${thread}-${i + 1}`))
      }
    }
    for (const { worker } of owners.values()) expect(["worker-1", "worker-2"]).toContain(worker)

    // SIGTERM: exit 0, children gone.
    for (const pid of childPids) expect(isAlive(pid)).toBe(true)
    killPid(demo.pid, "SIGTERM")
    expect(await demo.exited).toEqual({ code: 0, signal: null })
    for (const pid of childPids) expect(await waitForPidGone(pid, 2_000)).toBe(true)
    expect(demo.lines.filter((line) => line.includes('"message":"worker deregistered"'))).toHaveLength(2)
  }, scaled(60_000))
})
