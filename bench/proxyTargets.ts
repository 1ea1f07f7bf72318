// The targets of bench/proxy.ts: the processes behind them (each its own process on the
// servers' core), the worker's registration with Pinboard and its heartbeats, the wait past
// the registry's cold start, and a check that every target answers alike. With `--floors`,
// two more: the undici proxy with one EVALSHA per request, and with one Effect fiber as well.
// With `--observability`, two more Pinboards on the same redis-server, started by
// bench/proxyObserved.ts: metrics on, and metrics plus the access log.
import WebSocket from "ws"
import { freePort } from "../test/support/Ports.js"
import type { RedisServer } from "../test/support/RedisServer.js"
import { spawnNode, type Proc } from "./processes.js"
import type { ObservedPinboard } from "./proxyObserved.js"

export const LOAD_CORE = 0
export const SERVER_CORE = 1
export const TOKEN = "bench-token"
export const LEASE_MS = 3000
const HEARTBEAT_MS = LEASE_MS / 6
export const NAMESPACE = "/bench"
export const IDS = Array.from({ length: 8 }, (_, i) => `b${i}`)
/** The path `answer` (`small`, `large`...) of every placed id, which wrk rotates over. */
export const placedPaths = (answer: string): Array<string> => IDS.map((id) => `${NAMESPACE}/${id}/${answer}`)
/** One target's GET load over the placed ids (bench/measure.ts), with no warm-up of its own. */
export const getLoad = (origin: string, answer: string, connections: number, seconds: number) =>
  ({ origins: [origin], paths: placedPaths(answer), method: "GET" as const, bodyBytes: 0, connections, seconds, warmupS: 0 })
export const script = (name: string) => new URL(`./${name}`, import.meta.url).pathname
const MAIN = new URL("../../dist/main.js", import.meta.url).pathname

/** The floors: what any design that runs one Redis script and one Effect fiber per request can reach. */
export type FloorName = "undici-evalsha" | "undici-effect"
/** Pinboard with its observability on: the same process as "pinboard" but for the settings. */
export type ObservedName = "pinboard-metrics" | "pinboard-logged"
/** `--compare=<main.js>`: another build of Pinboard (an earlier commit's), on the same redis-server. */
export type CompareName = "pinboard-compare"
export type TargetName = "direct" | "pinboard" | "http-proxy" | "undici" | FloorName | ObservedName | CompareName
type AlwaysStarted = Exclude<TargetName, FloorName | ObservedName | CompareName>
export const TARGET_LABELS: Record<TargetName, string> = {
  direct: "direct to the worker",
  pinboard: "Pinboard (Redis)",
  "http-proxy": "node-http-proxy",
  undici: "bare undici proxy",
  "undici-evalsha": "undici + EVALSHA",
  "undici-effect": "undici + EVALSHA + Effect",
  "pinboard-metrics": "Pinboard, metrics on",
  "pinboard-logged": "Pinboard, metrics + access log",
  "pinboard-compare": "Pinboard, the --compare build"
}
export const TARGETS: ReadonlyArray<AlwaysStarted> = ["direct", "pinboard", "http-proxy", "undici"]
export const FLOORS: ReadonlyArray<FloorName> = ["undici-evalsha", "undici-effect"]
export const OBSERVED: ReadonlyArray<ObservedName> = ["pinboard-metrics", "pinboard-logged"]
/** The mode argument of bench/undiciProxy.ts for each floor. */
const FLOOR_MODES: Record<FloorName, string> = { "undici-evalsha": "evalsha", "undici-effect": "evalsha-effect" }
/** Targets whose requests reach redis-server: its CPU share is read around their windows. */
const REDIS_TARGETS: ReadonlySet<TargetName> = new Set<TargetName>(["pinboard", "pinboard-compare", ...FLOORS, ...OBSERVED])
export const usesRedis = (target: TargetName): boolean => REDIS_TARGETS.has(target)
/**
 * The observed Pinboards skip WebSocket echo: an upgrade is counted and logged once, the
 * messages of its tunnel never, so that scenario would show nothing of their cost.
 */
export const measuredIn = (target: TargetName, kind: "http" | "ws"): boolean =>
  kind === "http" || !(OBSERVED as ReadonlyArray<TargetName>).includes(target)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export interface Servers {
  readonly redis: RedisServer
  readonly worker: Proc
  readonly pinboard: Proc
  readonly httpProxy: Proc
  readonly undici: Proc
  readonly floors: ReadonlyArray<Proc>
  readonly observed: ReadonlyArray<ObservedPinboard>
  /** The `--compare` build, when asked for. */
  readonly compare: PinboardProc | undefined
  /** Every target started, in the order they are measured: TARGETS, FLOORS with `--floors`, OBSERVED with `--observability`, then the `--compare` build. */
  readonly targets: ReadonlyArray<TargetName>
  readonly origins: Origins
  readonly proxyPid: Partial<Record<TargetName, number>>
}

export type Origins = Record<AlwaysStarted, string> & Partial<Record<FloorName | ObservedName | CompareName, string>>

export const originOf = (origins: Origins, target: TargetName): string => {
  const origin = origins[target]
  if (origin === undefined) throw new Error(`${TARGET_LABELS[target]} was not started`)
  return origin
}

/** The port a bench process prints as `listening <port>`. */
export const listeningPort = async (proc: Proc): Promise<number> => Number((await proc.waitForLine(/^listening (\d+)$/, 10_000))[1])

/** The Effect floor (bench/undiciProxy.ts in evalsha-effect mode) alone on the server core, with Node flags (a profiler's), once it listens. */
export const startEffectFloor = async (workerOrigin: string, redisPort: number, nodeFlags: ReadonlyArray<string>): Promise<PinboardProc> => {
  const proc = spawnNode(TARGET_LABELS["undici-effect"], SERVER_CORE, script("undiciProxy.js"), [workerOrigin, FLOOR_MODES["undici-effect"], String(redisPort)], process.env, nodeFlags)
  return { proc, origin: `http://127.0.0.1:${await listeningPort(proc)}` }
}

/** bench/worker.ts on the server core, once it listens. */
export const startWorker = async (): Promise<{ readonly proc: Proc; readonly origin: string }> => {
  const proc = spawnNode("worker", SERVER_CORE, script("worker.js"), [])
  return { proc, origin: `http://127.0.0.1:${await listeningPort(proc)}` }
}

export interface Extras {
  readonly floors: boolean
  /** Started already (bench/proxyObserved.ts); waited for and added to the targets here. */
  readonly observed: ReadonlyArray<ObservedPinboard>
  /** `main.js` of another build (or this one) and its Node flags, measured beside this one on the same registry. */
  readonly compare?: { readonly main: string; readonly nodeFlags: ReadonlyArray<string> }
}

export const startServers = async (redis: RedisServer, extras: Extras): Promise<Servers> => {
  const { proc: worker, origin: workerOrigin } = await startWorker()
  const pinboard = await startPinboard("pinboard", { PINBOARD_REDIS_URL: redis.url })
  const httpProxy = spawnNode("node-http-proxy", SERVER_CORE, script("nodeHttpProxy.js"), [workerOrigin])
  const undici = spawnNode("undici proxy", SERVER_CORE, script("undiciProxy.js"), [workerOrigin])
  const floorNames = extras.floors ? FLOORS : []
  const floors = floorNames.map((floor) =>
    spawnNode(TARGET_LABELS[floor], SERVER_CORE, script("undiciProxy.js"), [workerOrigin, FLOOR_MODES[floor], String(redis.port)])
  )
  const origins: Origins = {
    direct: workerOrigin,
    pinboard: pinboard.origin,
    "http-proxy": `http://127.0.0.1:${await listeningPort(httpProxy)}`,
    undici: `http://127.0.0.1:${await listeningPort(undici)}`
  }
  const proxyPid: Partial<Record<TargetName, number>> = { pinboard: pinboard.proc.pid, "http-proxy": httpProxy.pid, undici: undici.pid }
  for (const [i, floor] of floorNames.entries()) {
    origins[floor] = `http://127.0.0.1:${await listeningPort(floors[i]!)}`
    proxyPid[floor] = floors[i]!.pid
  }
  const { observed } = extras
  for (const started of observed) {
    origins[started.target] = started.origin
    proxyPid[started.target] = started.proc.pid
  }
  const compare = extras.compare === undefined ? undefined : await startPinboard("pinboard-compare", { PINBOARD_REDIS_URL: redis.url }, extras.compare.nodeFlags, extras.compare.main)
  if (compare !== undefined) {
    origins["pinboard-compare"] = compare.origin
    proxyPid["pinboard-compare"] = compare.proc.pid
  }
  await waitHealthy(pinboard)
  for (const started of observed) await waitHealthy(started)
  if (compare !== undefined) await waitHealthy(compare)
  return {
    redis,
    worker,
    pinboard: pinboard.proc,
    httpProxy,
    undici,
    floors,
    observed,
    compare,
    targets: [...TARGETS, ...floorNames, ...observed.map((started) => started.target), ...(compare === undefined ? [] : (["pinboard-compare"] as const))],
    origins,
    proxyPid
  }
}

export interface PinboardProc {
  readonly proc: Proc
  readonly origin: string
}

/** Starts `dist/main.js` (or another build's `main`) on SERVER_CORE on a free port, with `env` naming its Redis; does not wait for it. */
export const startPinboard = async (
  name: string,
  env: Readonly<Record<string, string>>,
  nodeFlags: ReadonlyArray<string> = [],
  main: string = MAIN
): Promise<PinboardProc> => {
  const port = await freePort()
  const proc = spawnNode(name, SERVER_CORE, main, [], {
    ...process.env,
    ...env,
    PINBOARD_TOKEN: TOKEN,
    PINBOARD_PORT: String(port),
    PINBOARD_HOST: "127.0.0.1",
    PINBOARD_LEASE_MS: String(LEASE_MS)
  }, nodeFlags)
  return { proc, origin: `http://127.0.0.1:${port}` }
}

/** Polls a Pinboard's `/healthz` until it answers 200. */
export const waitHealthy = async ({ proc: pinboard, origin }: PinboardProc): Promise<void> => {
  for (let started = performance.now(); ; await sleep(50)) {
    if (!pinboard.alive()) throw new Error(`${pinboard.name} exited at start; output:\n${pinboard.lines.join("\n")}`)
    if (await fetch(`${origin}/healthz`).then((r) => r.ok, () => false)) return
    if (performance.now() - started > 15_000) throw new Error(`${pinboard.name} not healthy within 15 s; output:\n${pinboard.lines.join("\n")}`)
  }
}

export interface Registration {
  readonly stats: { beats: number; failed: number; reregistered: number; slowestMs: number }
  readonly stop: () => void
}

/** Registers the worker for NAMESPACE and heartbeats every HEARTBEAT_MS, as a worker would. */
export const register = async (pinboard: string, workerOrigin: string): Promise<Registration> => {
  const headers = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }
  const registerOnce = async (): Promise<string> => {
    const r = await fetch(`${pinboard}/registry/workers`, {
      method: "POST",
      headers,
      body: JSON.stringify({ worker: "bench", advertiseUrl: workerOrigin, namespaces: [NAMESPACE], headroom: 100 })
    })
    const body = (await r.json()) as { incarnation?: string }
    if (r.status !== 200 || body.incarnation === undefined) throw new Error(`register: ${r.status} ${JSON.stringify(body)}`)
    return body.incarnation
  }
  let incarnation = await registerOnce()
  const stats = { beats: 0, failed: 0, reregistered: 0, slowestMs: 0 }
  const beat = async () => {
    const started = performance.now()
    const r = await fetch(`${pinboard}/registry/workers/bench/heartbeat`, {
      method: "POST",
      headers,
      body: JSON.stringify({ incarnation, headroom: 100 })
    })
    const text = await r.text()
    stats.slowestMs = Math.max(stats.slowestMs, performance.now() - started)
    if (r.status === 200) stats.beats++
    else if (r.status === 410) {
      stats.reregistered++
      console.log(`WARNING heartbeat: 410 ${text}; registering again (placements end)`)
      incarnation = await registerOnce()
    } else {
      stats.failed++
      console.log(`WARNING heartbeat: ${r.status} ${text}`)
    }
  }
  let stopped = false
  const timer = setInterval(() => void beat().catch((error: unknown) => {
    // A beat in flight when the run stops fails with its Pinboard: not a failure of the run.
    if (stopped) return
    stats.failed++
    console.log(`WARNING heartbeat: ${String(error)}`)
  }), HEARTBEAT_MS)
  return {
    stats,
    stop: () => {
      stopped = true
      clearInterval(timer)
    }
  }
}

/** Polls every id through Pinboard until it answers 200: past the cold start, placed. */
export const waitForPlacements = async (pinboard: string): Promise<string> => {
  const started = performance.now()
  const seen = new Map<number, number>()
  for (const id of IDS) {
    for (;;) {
      const r = await fetch(`${pinboard}${NAMESPACE}/${id}/small`)
      await r.arrayBuffer()
      seen.set(r.status, (seen.get(r.status) ?? 0) + 1)
      if (r.status === 200) break
      if (performance.now() - started > 3 * LEASE_MS + 10_000) throw new Error(`${id} not placed; statuses seen: ${[...seen]}`)
      await sleep(100)
    }
  }
  const statuses = [...seen].map(([status, n]) => `${n}x ${status}`).join(", ")
  return `${IDS.length} ids placed after ${((performance.now() - started) / 1000).toFixed(1)} s (answers while polling: ${statuses})`
}

/** What bench/worker.ts answers: GET paths and their body sizes, and the POST that it reads whole. */
export const ANSWERS: ReadonlyArray<{ readonly path: string; readonly method: "GET" | "POST"; readonly bodyBytes: number; readonly answerBytes: number }> = [
  { path: "small", method: "GET", bodyBytes: 0, answerBytes: 64 },
  { path: "large", method: "GET", bodyBytes: 0, answerBytes: 64 * 1024 },
  { path: "huge", method: "GET", bodyBytes: 0, answerBytes: 1024 * 1024 },
  { path: "upload", method: "POST", bodyBytes: 64 * 1024, answerBytes: 64 }
]

/** Every target answers the same bodies, takes the POST's body whole, and echoes, before anything is measured. */
export const checkTargets = async (servers: Servers): Promise<void> => {
  for (const target of servers.targets) {
    const origin = originOf(servers.origins, target)
    for (const { path, method, bodyBytes, answerBytes } of ANSWERS) {
      const r = await fetch(`${origin}${NAMESPACE}/${IDS[0]}/${path}`, {
        method,
        ...(bodyBytes > 0 ? { body: new Uint8Array(bodyBytes).fill(112), headers: { "content-type": "application/octet-stream" } } : {})
      })
      const body = await r.arrayBuffer()
      if (r.status !== 200 || body.byteLength !== answerBytes) {
        throw new Error(`${TARGET_LABELS[target]}: ${method} ${path} answered ${r.status} with ${body.byteLength} bytes (expected 200, ${answerBytes})`)
      }
    }
    await new Promise<void>((resolve, reject) => {
      const client = new WebSocket(`${origin.replace(/^http/, "ws")}${NAMESPACE}/${IDS[0]}/ws`)
      const timer = setTimeout(() => reject(new Error(`${TARGET_LABELS[target]}: no WebSocket echo within 5 s`)), 5000)
      client.once("open", () => client.send("ping"))
      client.once("message", (data: Buffer) => {
        clearTimeout(timer)
        client.terminate()
        if (data.toString() === "ping") resolve()
        else reject(new Error(`${TARGET_LABELS[target]}: WebSocket echoed ${JSON.stringify(data.toString())}`))
      })
      client.once("error", (error) => {
        clearTimeout(timer)
        reject(new Error(`${TARGET_LABELS[target]}: WebSocket: ${error.message}`))
      })
    })
  }
}

