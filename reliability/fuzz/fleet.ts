// The processes a fuzz run drives: a redis-server on a free port, the built Pinboard
// (`node dist/main.js`) on Redis with the fuzz config's data-plane rules, and fixture workers
// (test/fixtures/worker.mjs). Everything is started here and killed by pid on every exit
// path (`stopAllSync`, also on SIGINT/SIGTERM and uncaught errors).
import { createHash } from "node:crypto"
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { killPid, spawnProcess, type Spawned } from "../../test/support/Processes.js"
import { freePort } from "../../test/support/Ports.js"
import { startRedisServer, type RedisServer } from "../../test/support/RedisServer.js"

/** The repository root: this file runs as dist-bench/reliability/fuzz/fleet.js. */
export const ROOT = new URL("../../../", import.meta.url).pathname
const MAIN = join(ROOT, "dist/main.js")
const WORKER = join(ROOT, "test/fixtures/worker.mjs")

export const TOKEN = "fuzz-deployment-token-0b5e55ed"
export const LEASE_MS = 2000
export const JWT_SECRET = "fuzz-hs256-secret-8d1c5a0f6b2e4d7c9a3f"
export const JWT_ISSUER = "https://issuer.fuzz.test/"
export const JWT_AUDIENCE = "pinboard-fuzz"
export const API_KEY = "fuzz-api-key-3f9c2b7e1a4d"
export const WORKER_IDS = ["fz-w1", "fz-w2"] as const
/** Namespaces the workers serve; `/star` has no rule of its own (the `*` rule applies). */
export const SERVED = ["/open", "/auth", "/opt", "/calls", "/star"] as const

export const sha256Hex = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex")

/**
 * The data-plane rules (docs/config.md): one namespace per rule kind, a `*` rule on a header
 * credential, scopes on `/auth`, `callers` on `/calls`.
 */
export const FUZZ_CONFIG = {
  providers: {
    hs: { type: "jwt", secret: JWT_SECRET, issuer: JWT_ISSUER, audience: JWT_AUDIENCE },
    keys: { type: "apikey", keys: [{ sha256: sha256Hex(API_KEY), subject: "ci", scopes: ["fuzz"] }] }
  },
  namespaces: [
    { namespace: "/open", auth: "none" },
    { namespace: "/auth", auth: "required", providers: ["hs", "keys"], scopes: ["fuzz"] },
    { namespace: "/opt", auth: "optional", providers: ["hs"], credential: { cookie: "session" } },
    { namespace: "/calls", auth: "required", providers: ["hs"], callers: ["/open"] },
    { namespace: "*", auth: "required", providers: ["keys"], credential: { header: "x-api-key" } }
  ]
}

export interface Child extends Spawned {
  readonly name: string
}

const children: Array<Child> = []
let redis: RedisServer | undefined
let dir: string | undefined

/** Lines kept per child; older ones are dropped (a long run must not hold every line). */
const MAX_LINES = 2000

const spawnChild = (name: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv, onLine: (line: string) => void): Child => {
  const entry: Child = Object.assign(spawnProcess(process.execPath, args, { env }, { name, keptLines: MAX_LINES }), { name })
  entry.onLine(onLine)
  children.push(entry)
  return entry
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export interface Fleet {
  readonly port: number
  readonly url: string
  readonly pinboard: Child
  readonly workers: ReadonlyArray<Child & { readonly id: string; readonly port: number }>
  readonly redisPid: number
  readonly redisPort: number
}

export interface FleetHooks {
  /** Every line Pinboard prints. */
  readonly onPinboardLine: (line: string) => void
  /** Every line a worker prints. */
  readonly onWorkerLine: (worker: string, line: string) => void
}

export const startFleet = async (hooks: FleetHooks): Promise<Fleet> => {
  dir = mkdtempSync(join(tmpdir(), "pinboard-fuzz-"))
  redis = await startRedisServer()
  const configFile = join(dir, "config.json")
  writeFileSync(configFile, JSON.stringify(FUZZ_CONFIG))
  const port = await freePort()
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("PINBOARD_")))
  const pinboard = spawnChild(
    "pinboard",
    [MAIN],
    {
      ...clean,
      PINBOARD_TOKEN: TOKEN,
      PINBOARD_PORT: String(port),
      PINBOARD_HOST: "127.0.0.1",
      PINBOARD_LEASE_MS: String(LEASE_MS),
      PINBOARD_REDIS_URL: redis.url,
      PINBOARD_REDIS_PREFIX: "fuzz",
      PINBOARD_CONFIG: configFile
    },
    hooks.onPinboardLine
  )
  const url = `http://127.0.0.1:${port}`
  const deadline = performance.now() + 20_000
  for (;;) {
    if (pinboard.exit !== undefined) throw new Error(`pinboard exited during start-up:\n${pinboard.lines.join("\n")}`)
    const healthy = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) }).then(
      async (res) => (await res.arrayBuffer(), res.status === 200),
      () => false
    )
    if (healthy) break
    if (performance.now() > deadline) throw new Error(`pinboard did not answer /healthz:\n${pinboard.lines.join("\n")}`)
    await sleep(50)
  }
  const workers = await Promise.all(
    WORKER_IDS.map(async (id) => {
      const worker = spawnChild(
        id,
        [WORKER, "--pinboard", url, "--token", TOKEN, "--worker", id, "--namespaces", SERVED.join(","), "--headroom", "10"],
        clean,
        (line) => hooks.onWorkerLine(id, line)
      )
      const ready = new RegExp(`^worker ${id} ready on (\\d+)$`)
      const until = performance.now() + 20_000
      for (;;) {
        const match = worker.lines.map((line) => line.match(ready)).find((m) => m !== null)
        if (match) return Object.assign(worker, { id, port: Number(match[1]) })
        if (worker.exit !== undefined || performance.now() > until) {
          throw new Error(`worker ${id} did not start:\n${worker.lines.join("\n")}`)
        }
        await sleep(20)
      }
    })
  )
  return { port, url, pinboard, workers, redisPid: redis.pid, redisPort: redis.port }
}

/** Kills every process started here, by pid; safe to call more than once and from exit handlers. */
export const stopAllSync = (): void => {
  for (const entry of children) if (entry.alive()) killPid(entry.pid)
  redis?.stopSync()
  redis = undefined
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  dir = undefined
}

// ---- what the process holds ----------------------------------------------------------------

/** Open file descriptors, and how many of them are sockets. */
export const fdCounts = (pid: number): { readonly fds: number; readonly sockets: number } | undefined => {
  try {
    const entries = readdirSync(`/proc/${pid}/fd`)
    let sockets = 0
    for (const fd of entries) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("socket:")) sockets++
      } catch {
        // closed while listing
      }
    }
    return { fds: entries.length, sockets }
  } catch {
    return undefined
  }
}

/** Pinboard's TCP sockets by peer: the listener, clients, Redis, each worker, anything else. */
export const socketPeers = (pid: number, ports: { readonly pinboard: number; readonly redis: number; readonly workers: ReadonlyArray<readonly [string, number]> }): Map<string, number> => {
  const peers = new Map<string, number>()
  try {
    const inodes = new Set<string>()
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const match = readlinkSync(`/proc/${pid}/fd/${fd}`).match(/^socket:\[(\d+)\]$/)
        if (match) inodes.add(match[1]!)
      } catch {
        // closed while listing
      }
    }
    const STATES: Record<string, string> = { "01": "established", "06": "time-wait", "08": "close-wait", "0A": "listen", "04": "fin-wait-1", "05": "fin-wait-2", "09": "last-ack", "0B": "closing" }
    for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
      let text = ""
      try {
        text = readFileSync(table, "utf8")
      } catch {
        continue
      }
      for (const line of text.split("\n").slice(1)) {
        const cols = line.trim().split(/\s+/)
        if (cols.length < 10 || !inodes.has(cols[9]!)) continue
        const localPort = parseInt(cols[1]!.split(":")[1]!, 16)
        const remotePort = parseInt(cols[2]!.split(":")[1]!, 16)
        const state = STATES[cols[3]!] ?? cols[3]!
        const worker = ports.workers.find(([, port]) => port === remotePort)?.[0]
        const peer =
          state === "listen"
            ? "listener"
            : localPort === ports.pinboard
            ? "from a client"
            : remotePort === ports.redis
            ? "to redis"
            : worker !== undefined
            ? `to worker ${worker}`
            : `to port ${remotePort}`
        const key = `${peer} (${state})`
        peers.set(key, (peers.get(key) ?? 0) + 1)
        inodes.delete(cols[9]!)
      }
    }
    if (inodes.size > 0) peers.set("other sockets (unix, udp)", inodes.size)
  } catch {
    // the process is gone
  }
  return peers
}
