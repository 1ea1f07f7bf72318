// `npm run demo` end to end: the built demo (Pinboard, embedded registry, two workers) as a
// real process tree; the curl and kill lines it prints are performed as printed (threads on
// both workers, a failover), then it is stopped by SIGTERM, or by SIGINT to npm alone, and
// must exit leaving no process behind.
import { existsSync } from "node:fs"
import { createServer, type AddressInfo } from "node:net"
import { fileURLToPath } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
import { freePort, isAlive, killPid, spawnProcess, waitForPidGone, type Spawned } from "../support/Processes.js"
import { eventually, scaled } from "../support/Time.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
const LEASE_MS = 2000

interface Printed {
  readonly method: string
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: string | undefined
}

/** `curl -s [-X METHOD] host:port/path [-H 'name: value'] [-d 'body']` as the demo prints it. */
const CURL = /^\s*curl -s (?:-X (\w+) )?(\S+)(?: -H '([^:']+): ([^']*)')?(?: -d '([^']*)')?\s*$/
const parseCurl = (line: string): Printed => {
  const match = CURL.exec(line)
  if (match === null) throw new Error(`not a curl line the test understands: ${line}`)
  const headers: Record<string, string> = match[3] === undefined ? {} : { [match[3]]: match[4]! }
  return { method: match[1] ?? "GET", url: `http://${match[2]}`, headers, body: match[5] }
}

interface ThreadAnswer {
  readonly thread: string
  readonly worker: string
  readonly epoch: string
  readonly messages: Array<string>
}

const perform = async (request: Printed) => {
  const res = await fetch(request.url, { method: request.method, headers: request.headers, ...(request.body === undefined ? {} : { body: request.body }) })
  const text = await res.text()
  return { status: res.status, json: (res.status === 200 ? JSON.parse(text) : {}) as ThreadAnswer }
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

    const printed = (pattern: string) => demo!.waitForLine(new RegExp(`^  ${pattern}$`), 1_000).then((m) => m.input!)
    const postT1 = await demo.waitForLine(new RegExp(`^  curl -s -X POST localhost:${port}/threads/t1/messages -H 'x-user: \\w+' -d 'hello'$`), 30_000)
    const postT2 = await printed(`curl -s -X POST localhost:${port}/threads/t2/messages -H 'x-user: \\w+' -d 'another thread'`)
    const getT1 = await printed(`curl -s localhost:${port}/threads/t1/messages`)
    const getT2 = await printed(`curl -s localhost:${port}/threads/t2/messages`)
    const watchLine = await printed(`node dist/demo/watch.js ws://localhost:${port}/threads/t1/stream`)
    const killLine = await printed("kill -9 \\d+")
    expect(demo.lines.some((line) => line.includes("waiting for the registry cold start"))).toBe(true)
    childPids = demo.lines.flatMap((line) => {
      const started = /started (pinboard|worker-\d) \(pid (\d+)\)/.exec(line)
      return started ? [Number(started[2])] : []
    })
    expect(childPids).toHaveLength(3)

    // The printed lines, as printed: the watcher first, so that it sees the message posted.
    const [command, ...args] = watchLine.trim().split(/\s+/)
    expect(command).toBe("node")
    const watcher = spawnProcess(process.execPath, args, { cwd: root })
    await watcher.waitForLine(/^watching /, 10_000)
    const posted = await perform(parseCurl(postT1.input!))
    await watcher.waitForLine(/^hello$/, 5_000)
    await watcher.kill()
    expect(posted.status).toBe(200)
    const got = await perform(parseCurl(getT1))
    expect(got.status).toBe(200)
    expect(got.json).toMatchObject({ thread: "t1", messages: ["hello"], worker: "worker-1" })
    expect(got.json.epoch).toMatch(/^[0-9]+$/)
    expect(got.json.epoch).toBe(posted.json.epoch)

    // The second thread lands on the other worker, as the demo says, and stays there for any caller.
    expect((await perform(parseCurl(postT2))).json).toMatchObject({ thread: "t2", worker: "worker-2", messages: ["another thread"] })
    expect((await perform(parseCurl(getT2))).json).toMatchObject({ thread: "t2", worker: "worker-2", messages: ["another thread"] })

    // Several threads, several rounds: each thread answers from one worker at one epoch.
    const threads = ["a", "b", "c", "d", "e", "f", "g", "h"]
    const owners = new Map<string, { worker: string; epoch: string }>()
    for (const round of [1, 2, 3]) {
      for (const thread of threads) {
        const url = `http://localhost:${port}/threads/${thread}/messages`
        const { status, json } = await perform({ method: "POST", url, headers: {}, body: `${thread}-${round}` })
        expect(status).toBe(200)
        const owner = owners.get(thread) ?? { worker: json.worker, epoch: json.epoch }
        owners.set(thread, owner)
        expect(json).toMatchObject({ thread, ...owner })
        expect(json.messages).toEqual(Array.from({ length: round }, (_, i) => `${thread}-${i + 1}`))
      }
    }
    for (const { worker } of owners.values()) expect(["worker-1", "worker-2"]).toContain(worker)

    // The kill line, as printed: t1 answers 502 until worker-1's lease lapses, then comes from worker-2
    // at a newer epoch; the demo starts worker-1 again and goes on.
    const killed = Number(/kill -9 (\d+)/.exec(killLine)![1])
    expect(childPids).toContain(killed)
    killPid(killed, "SIGKILL")
    const moved = await eventually(async () => {
      const answer = await perform(parseCurl(getT1))
      expect([200, 502]).toContain(answer.status)
      expect(answer.status).toBe(200)
      return answer.json
    }, LEASE_MS * 3)
    expect(moved).toMatchObject({ thread: "t1", worker: "worker-2", messages: [] })
    expect(BigInt(moved.epoch)).toBeGreaterThan(BigInt(posted.json.epoch))
    const back = await demo.waitForLine(/worker-1 is back \(pid (\d+)\): kill -9 \d+/, LEASE_MS * 3)
    childPids = [...childPids.filter((pid) => pid !== killed), Number(back[1])]
    expect((await perform(parseCurl(getT1))).json).toMatchObject({ thread: "t1", worker: "worker-2", epoch: moved.epoch })

    // SIGTERM: exit 0, children gone.
    for (const pid of childPids) expect(isAlive(pid)).toBe(true)
    killPid(demo.pid, "SIGTERM")
    expect(await demo.exited).toEqual({ code: 0, signal: null })
    for (const pid of childPids) expect(await waitForPidGone(pid, 2_000)).toBe(true)
    expect(demo.lines.filter((line) => line.includes('"message":"worker deregistered"'))).toHaveLength(2)
  }, scaled(60_000))

  // `npm run demo` is the build, then `npm run demo:start`: run here without the build, which
  // would rewrite dist/ under the other end-to-end tests.
  it("Ctrl-C that reaches only npm stops everything", async () => {
    const port = await freePort()
    demo = spawnProcess("npm", ["run", "demo:start"], { cwd: root, env: { ...process.env, PORT: String(port), PINBOARD_LEASE_MS: String(LEASE_MS) } })
    await demo.waitForLine(/\[demo\] ready/, 90_000)
    childPids = demo.lines.flatMap((line) => {
      const started = /started (pinboard|worker-\d) \(pid (\d+)\)/.exec(line)
      return started ? [Number(started[2])] : []
    })
    expect(childPids).toHaveLength(3)
    killPid(demo.pid, "SIGINT")
    await demo.exited
    for (const pid of childPids) expect(await waitForPidGone(pid, 5_000)).toBe(true)
    expect(demo.lines.some((line) => line === "[demo] stopped")).toBe(true)
  }, scaled(120_000))

  it("a bad PORT, or one in use, is named as PORT", async () => {
    const bad = spawnProcess(process.execPath, ["dist/demo/run.js"], { cwd: root, env: { ...process.env, PORT: "80a" } })
    expect(await bad.exited).toEqual({ code: 2, signal: null })
    expect(bad.lines).toContain(`[demo] PORT: expected an integer from 1 to 65535, got "80a"`)
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, resolve))
    const port = (taken.address() as AddressInfo).port
    try {
      demo = spawnProcess(process.execPath, ["dist/demo/run.js"], { cwd: root, env: { ...process.env, PORT: String(port) } })
      expect(await demo.exited).toEqual({ code: 2, signal: null })
      expect(demo.lines).toContain(`[demo] PORT ${port} is taken: set PORT to a free port (PORT=8081 npm run demo)`)
    } finally {
      taken.close()
    }
  }, scaled(30_000))
})
