// Soak: steady load through Pinboard on Redis while workers come and go, with Pinboard's RSS
// and Redis's memory sampled; both must level off (docs/reliability.md "Soak").
//
//   npm run soak                    2 minutes of load (after setup)
//   npm run soak -- --minutes 30    the real soak
//
// Starts a redis-server on a free loopback port, the built Pinboard (`node dist/main.js`) on it
// (short lease, affinity from a header so placements spread over the workers), and a pool of
// workers built on the worker library (reliability/soak/worker.ts) with a short idle timeout.
// Then, for N minutes:
//   - load: a fixed number of HTTP clients paced to a total request rate, GETs and small POSTs
//     (and a few instance-to-instance relays) to a small hot set of ids plus a rotating
//     population that slides forward all the time, so placements are made, evicted idle and
//     swept throughout; each client replaces its connection every 100-1000 requests; a few
//     WebSocket clients open, echo and close sockets;
//   - churn: every 10-20 s the oldest worker is stopped, SIGTERM (graceful) and SIGKILL in
//     turn, and a fresh one with a new worker id takes its place;
//   - a sample every 10 s: Pinboard's RSS, open fds and CPU, its V8 heap (through the inspector,
//     `--inspect` on a loopback port; `--no-heap` to run without), Redis `INFO` used_memory and
//     `DBSIZE`, requests/s and statuses, WebSocket counts, live and listed workers.
// At the end the first and last windows are compared (30 minutes or more: first 10 minutes vs
// last 10; shorter: first third vs last third after a minute of warm-up) for Pinboard's RSS and
// Redis's used_memory: within 10% (or below) "levels off", else "GROWING". The heap (mean, and
// the mean of each minute's low), DBSIZE and open fds are compared too, for information only.
//
// Options (defaults): --minutes 2, --clients 32, --rps 400, --workers 4, --ids 10000,
// --hot-ids 100, --rotate-per-s 20, --ws 4, --idle-ms 2000, --lease-ms 3000, --sample-s 10,
// --churn-min-s 10, --churn-max-s 20, --no-heap.
//
// Exit code: 0 when memory levels off and nothing broke; 1 when memory grows or something broke
// (a process died unexpectedly, a 500 or another unexpected status, too many client errors, no
// successful requests or WebSockets); 3 at the hard time limit; 130/143 on SIGINT/SIGTERM.
// 502s and 503s are expected while workers come and go (refusals, a killed worker's lease not
// yet lapsed) and are only counted. Every child process is stopped by pid on every way out.
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { Redis } from "ioredis"
import { freePort } from "../test/support/Ports.js"
import { startRedisServer, type RedisServer } from "../test/support/RedisServer.js"
import { HeapProbe } from "./soak/inspector.js"
import { Load } from "./soak/load.js"
import { cpuSeconds, openFds, rssKiB } from "../bench/processes.js"
import { killAllSync, spawnNode, stopChild, type Child } from "./soak/processes.js"
import { isAlive } from "../test/support/Processes.js"
import { compare, comparisonLine, mb, sampleLine, windowsFor, type Sample } from "./soak/report.js"

const bytesOf = (kib: number | undefined): number | undefined => (kib === undefined ? undefined : kib * 1024)

const MAIN = new URL("../../dist/main.js", import.meta.url).pathname
const WORKER = new URL("./soak/worker.js", import.meta.url).pathname
const TOKEN = `soak-${randomBytes(8).toString("hex")}`
const NAMESPACE = "/soak-a"
const RELAY_NAMESPACE = "/soak-b"
/** Share of client errors (connection reset, timeout) above which the run counts as broken. */
const MAX_ERROR_SHARE = 0.01

// ---- options ----------------------------------------------------------------------------------

const { values: flags } = parseArgs({
  options: {
    minutes: { type: "string", default: "2" },
    clients: { type: "string", default: "32" },
    rps: { type: "string", default: "400" },
    workers: { type: "string", default: "4" },
    ids: { type: "string", default: "10000" },
    "hot-ids": { type: "string", default: "100" },
    "rotate-per-s": { type: "string", default: "20" },
    ws: { type: "string", default: "4" },
    "idle-ms": { type: "string", default: "2000" },
    "lease-ms": { type: "string", default: "3000" },
    "sample-s": { type: "string", default: "10" },
    "churn-min-s": { type: "string", default: "10" },
    "churn-max-s": { type: "string", default: "20" },
    "no-heap": { type: "boolean", default: false }
  }
})
const number = (name: Exclude<keyof typeof flags, "no-heap">, min: number): number => {
  const value = Number(flags[name])
  if (!Number.isFinite(value) || value < min) {
    process.stderr.write(`soak: --${name} expects a number >= ${min}, got ${JSON.stringify(flags[name])}\n`)
    process.exit(2)
  }
  return value
}
const MINUTES = number("minutes", 0.1)
const CLIENTS = Math.floor(number("clients", 1))
const RPS = number("rps", 1)
const WORKERS = Math.floor(number("workers", 2))
const IDS = Math.floor(number("ids", 1))
const HOT_IDS = Math.floor(number("hot-ids", 1))
const ROTATE_PER_S = number("rotate-per-s", 0)
const WS_CLIENTS = Math.floor(number("ws", 0))
const IDLE_MS = Math.floor(number("idle-ms", 100))
const LEASE_MS = Math.floor(number("lease-ms", 1000))
const SAMPLE_S = number("sample-s", 1)
const CHURN_MIN_S = number("churn-min-s", 1)
const CHURN_MAX_S = Math.max(CHURN_MIN_S, number("churn-max-s", 1))
const DURATION_S = MINUTES * 60
const HEAP = flags["no-heap"] !== true
/** Setup, the wind-up at the end and some slack: past this the soak gives up and cleans up. */
const HARD_LIMIT_MS = (DURATION_S + 300) * 1000

// ---- state, and cleanup on every way out -----------------------------------------------------

const started = performance.now()
const dir = mkdtempSync(join(tmpdir(), "pinboard-soak-"))
let redis: RedisServer | undefined
let redisClient: Redis | undefined
const problems: Array<string> = []
let ended = false
let endNow: () => void = () => undefined
const endRequested = new Promise<void>((resolve) => (endNow = resolve))
const requestEnd = (why?: string) => {
  if (why !== undefined) problems.push(why)
  ended = true
  endNow()
}

const cleanupSync = () => {
  killAllSync()
  redis?.stopSync()
  rmSync(dir, { recursive: true, force: true })
}
process.on("exit", cleanupSync)
for (const [name, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
  process.once(name, () => {
    process.stderr.write(`soak: ${name}, stopping everything\n`)
    cleanupSync()
    process.exit(code)
  })
}
const crash = (what: string) => (error: unknown) => {
  process.stderr.write(`soak: ${what}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
  cleanupSync()
  process.exit(1)
}
process.on("uncaughtException", crash("uncaught exception"))
process.on("unhandledRejection", crash("unhandled rejection"))
setTimeout(() => {
  process.stderr.write(`soak: hard time limit (${(HARD_LIMIT_MS / 60000).toFixed(1)} min) reached, stopping everything\n`)
  cleanupSync()
  process.exit(3)
}, HARD_LIMIT_MS).unref()

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)))
/** Sleeps, but wakes when the run ends early. */
const until = (ms: number) => Promise.race([sleep(ms), endRequested])
const log = (line: string) => process.stdout.write(`${line}\n`)
const lastLines = (child: Child, n = 15) => child.lines.slice(-n).map((l) => `    ${l}`).join("\n")
const fmt = (n: number) => n.toLocaleString("en-US")

// ---- processes -------------------------------------------------------------------------------

const childEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("PINBOARD_")))

const startPinboard = async (redisUrl: string): Promise<{ child: Child; origin: string; inspectPort: number | undefined }> => {
  const port = await freePort()
  // The inspector only answers Runtime.getHeapUsage (reliability/soak/inspector.ts).
  const inspectPort = HEAP ? await freePort() : undefined
  const config = join(dir, "pinboard.json")
  writeFileSync(config, JSON.stringify({ affinity: { key: "header:x-affinity" } }))
  const env = {
    ...childEnv,
    PINBOARD_TOKEN: TOKEN,
    PINBOARD_PORT: String(port),
    PINBOARD_HOST: "127.0.0.1",
    PINBOARD_LEASE_MS: String(LEASE_MS),
    PINBOARD_BUCKETS: "16",
    PINBOARD_REDIS_URL: redisUrl,
    PINBOARD_REDIS_PREFIX: "soak",
    PINBOARD_CONFIG: config
  }
  const child = spawnNode("pinboard", [...(inspectPort === undefined ? [] : [`--inspect=127.0.0.1:${inspectPort}`]), MAIN], env, (proc, code, sig) =>
    requestEnd(`pinboard exited unexpectedly (${code ?? sig}); its last lines:\n${lastLines(proc)}`)
  )
  const origin = `http://127.0.0.1:${port}`
  const deadline = performance.now() + 15_000
  for (;;) {
    if (!child.alive()) throw new Error(`pinboard exited during start-up:\n${lastLines(child)}`)
    const healthy = await fetch(`${origin}/healthz`, { signal: AbortSignal.timeout(1000) }).then(
      async (res) => (await res.arrayBuffer(), res.status === 200),
      () => false
    )
    if (healthy) return { child, origin, inspectPort }
    if (performance.now() > deadline) throw new Error(`pinboard did not answer /healthz within 15 s:\n${lastLines(child)}`)
    await sleep(100)
  }
}

const workers: Array<Child> = []
/** Every worker started, for their log lines in the summary. */
const everyWorker: Array<Child> = []
const churned = { SIGTERM: 0, SIGKILL: 0 }
const termStopMs: Array<number> = []
const runTag = randomBytes(2).toString("hex")
let workerSeq = 0

const startWorker = async (origin: string): Promise<Child> => {
  const id = `soak-${runTag}-w${++workerSeq}`
  const args = [WORKER, "--pinboard", origin, "--token", TOKEN, "--worker", id, "--namespaces", `${NAMESPACE},${RELAY_NAMESPACE}`, "--idle-ms", String(IDLE_MS)]
  const child = spawnNode(id, args, childEnv, (proc, code, sig) => {
    const at = workers.indexOf(proc)
    if (at !== -1) workers.splice(at, 1)
    problems.push(`worker ${proc.name} exited unexpectedly (${code ?? sig}); its last lines:\n${lastLines(proc)}`)
  })
  everyWorker.push(child)
  await child.waitForLine(/^soak-worker \S+ ready on \d+$/, 20_000)
  workers.push(child)
  return child
}

/** Every 10-20 s: stop the oldest worker (SIGTERM and SIGKILL in turn), start a fresh one. */
const churnLoop = async (origin: string): Promise<void> => {
  let how: "SIGTERM" | "SIGKILL" = "SIGTERM"
  while (!ended) {
    await until((CHURN_MIN_S + Math.random() * (CHURN_MAX_S - CHURN_MIN_S)) * 1000)
    if (ended) break
    const victim = workers.shift()
    if (victim !== undefined) {
      const t0 = performance.now()
      const result = await stopChild(victim, how, 15_000)
      churned[how]++
      if (how === "SIGTERM") {
        termStopMs.push(performance.now() - t0)
        if (result.forced) problems.push(`worker ${victim.name} did not exit within 15 s of SIGTERM; its last lines:\n${lastLines(victim)}`)
        else if (result.code !== 0) problems.push(`worker ${victim.name} exited ${result.code ?? result.signal} on SIGTERM; its last lines:\n${lastLines(victim)}`)
      }
      how = how === "SIGTERM" ? "SIGKILL" : "SIGTERM"
    }
    while (!ended && workers.length < WORKERS) {
      try {
        await startWorker(origin)
      } catch (error) {
        problems.push(`a worker did not start: ${error instanceof Error ? error.message : String(error)}`)
        break
      }
    }
  }
}

// ---- sampling --------------------------------------------------------------------------------

const infoField = (info: string, field: string): number | undefined => {
  const value = new RegExp(`^${field}:(\\d+)`, "m").exec(info)?.[1]
  return value === undefined ? undefined : Number(value)
}

const listedWorkers = async (origin: string): Promise<number | undefined> => {
  try {
    const res = await fetch(`${origin}/registry/workers`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(2000) })
    if (res.status !== 200) return void (await res.arrayBuffer())
    return ((await res.json()) as { workers: Array<unknown> }).workers.length
  } catch {
    return undefined
  }
}

// ---- the run ---------------------------------------------------------------------------------

const main = async (): Promise<number> => {
  log(
    `soak: ${MINUTES} min of load; ${CLIENTS} HTTP clients paced to <= ${RPS} req/s, ${WS_CLIENTS} WebSocket clients; ` +
      `ids: ${HOT_IDS} hot + ${fmt(IDS)} rotating (sliding ${ROTATE_PER_S}/s); ${WORKERS} workers (idle timeout ${IDLE_MS} ms), ` +
      `one replaced every ${CHURN_MIN_S}-${CHURN_MAX_S} s (SIGTERM and SIGKILL in turn); lease ${LEASE_MS} ms; a sample every ${SAMPLE_S} s`
  )
  redis = await startRedisServer()
  const redisPid = redis.pid
  redisClient = new Redis(redis.url, { maxRetriesPerRequest: 1 })
  const pinboard = await startPinboard(redis.url)
  const { origin } = pinboard
  const heapProbe = pinboard.inspectPort === undefined ? undefined : await HeapProbe.connect(pinboard.inspectPort)
  if (HEAP && heapProbe === undefined) log("soak: could not reach pinboard's inspector; heap not sampled")
  log(`soak: redis-server pid ${redis.pid} on ${redis.url}; pinboard pid ${pinboard.child.pid} on ${origin}`)

  for (let i = 0; i < WORKERS; i++) await startWorker(origin)
  // Registration was the buckets' first use: new placements wait out one lease (cold start).
  const warm = performance.now()
  for (;;) {
    const res = await fetch(`${origin}${NAMESPACE}/warmup/state`, { signal: AbortSignal.timeout(2000) }).catch(() => undefined)
    const status = res?.status
    await res?.arrayBuffer()
    if (status === 200) break
    if (performance.now() - warm > LEASE_MS + 20_000) throw new Error(`no 200 after the cold start (last status ${status ?? "none"})`)
    await sleep(200)
  }
  const setupS = (performance.now() - started) / 1000
  const windows = windowsFor(DURATION_S)
  log(`soak: setup took ${setupS.toFixed(1)} s; load starts now; memory compared: ${windows.label}`)

  const load = new Load({
    origin,
    clients: CLIENTS,
    rps: RPS,
    hotIds: HOT_IDS,
    hotShare: 0.4,
    population: IDS,
    rotatePerS: ROTATE_PER_S,
    wsClients: WS_CLIENTS,
    namespace: NAMESPACE,
    relayNamespace: RELAY_NAMESPACE
  })
  const loadStart = performance.now()
  load.start()
  const churn = churnLoop(origin)

  const samples: Array<Sample> = []
  let lastCpu = cpuSeconds(pinboard.child.pid)
  let lastAt = loadStart
  let intervalFrom = loadStart
  for (let k = 1; !ended; k++) {
    const dueS = Math.min(k * SAMPLE_S, DURATION_S)
    await until(loadStart + dueS * 1000 - performance.now())
    if (ended) break
    const now = performance.now()
    if (!isAlive(redisPid)) {
      requestEnd("redis-server exited unexpectedly")
      break
    }
    const pid = pinboard.child.pid
    const [info, dbsize, listed, heap] = await Promise.all([
      redisClient.info().catch(() => ""),
      redisClient.dbsize().catch(() => undefined),
      listedWorkers(origin),
      heapProbe?.usage()
    ])
    const cpu = cpuSeconds(pid)
    const { http, ws } = load.takeInterval()
    const sample: Sample = {
      t: dueS,
      pinboardRss: bytesOf(rssKiB(pid)),
      heapUsed: heap?.used,
      heapTotal: heap?.total,
      pinboardFds: openFds(pid),
      pinboardCpu: ((cpu - lastCpu) / ((now - lastAt) / 1000)) * 100,
      redisUsed: infoField(info, "used_memory"),
      redisRss: infoField(info, "used_memory_rss"),
      dbsize,
      redisClients: infoField(info, "connected_clients"),
      http,
      ws,
      workers: workers.length,
      listed,
      churned: churned.SIGTERM + churned.SIGKILL
    }
    lastCpu = cpu
    lastAt = now
    samples.push(sample)
    log(sampleLine(sample, (now - intervalFrom) / 1000))
    intervalFrom = now
    if (dueS >= DURATION_S) break
  }
  const loadS = (performance.now() - loadStart) / 1000
  const earlyEnd = ended
  requestEnd()
  await load.stop(10_000)
  await Promise.race([churn, sleep(30_000)])
  heapProbe?.close()

  // ---- the report ----
  const total = load.total
  const wsTotal = load.ws
  const rssCmp = compare("pinboard RSS", samples, windows, (s) => s.pinboardRss)
  const redisCmp = compare("redis used_memory", samples, windows, (s) => s.redisUsed)
  const keysCmp = compare("redis DBSIZE (informational)", samples, windows, (s) => s.dbsize)
  const fdsCmp = compare("pinboard fds (informational)", samples, windows, (s) => s.pinboardFds)
  const heapCmp = compare("pinboard heap used (informational)", samples, windows, (s) => s.heapUsed)
  const heapLowCmp = compare("pinboard heap used (informational)", samples, windows, (s) => s.heapUsed, "minute-lows")
  const plain = (v: number | undefined) => (v === undefined ? "?" : v.toFixed(0))
  const megabytes = (v: number | undefined) => `${mb(v)} MB`

  const unexpected = [...total.statuses].filter(([code]) => !(code >= 200 && code < 300) && code !== 502 && code !== 503)
  const wsUnexpected = [...wsTotal.refused].filter(([code]) => code !== 502 && code !== 503)
  if (total.ok === 0) problems.push("no successful request")
  if (unexpected.length > 0) problems.push(`unexpected statuses: ${unexpected.map(([c, n]) => `${c} x${n}`).join(", ")}`)
  if (total.requests > 0 && total.errorCount / total.requests > MAX_ERROR_SHARE) {
    problems.push(`client errors on ${((total.errorCount / total.requests) * 100).toFixed(2)}% of requests: ${[...total.errors].map(([e, n]) => `${e} x${n}`).join(", ")}`)
  }
  if (WS_CLIENTS > 0 && wsTotal.opened === 0) problems.push("no WebSocket opened")
  if (wsUnexpected.length > 0) problems.push(`unexpected WebSocket upgrade statuses: ${wsUnexpected.map(([c, n]) => `${c} x${n}`).join(", ")}`)
  if (earlyEnd) problems.push(`the run ended early, after ${(loadS / 60).toFixed(1)} of ${MINUTES} min`)

  const share = (n: number) => (total.requests === 0 ? "0" : ((n / total.requests) * 100).toFixed(2))
  const statusList = [...total.statuses]
    .sort(([a], [b]) => a - b)
    .map(([code, n]) => `${code} ${fmt(n)} (${share(n)}%)`)
    .join(", ")
  const errorList = total.errorCount === 0 ? "none" : [...total.errors].map(([e, n]) => `${e} ${fmt(n)}`).join(", ")
  const wsMap = (m: Map<number | string, number>) => (m.size === 0 ? "none" : [...m].map(([k, n]) => `${k} x${fmt(n)}`).join(", "))
  const maxTerm = termStopMs.length === 0 ? "-" : `${(Math.max(...termStopMs) / 1000).toFixed(1)} s`
  const memoryVerdicts = [rssCmp, redisCmp]
  const growing = memoryVerdicts.filter((c) => c.verdict === "GROWING")
  const judged = memoryVerdicts.every((c) => c.verdict !== "too short to judge")

  log("")
  log("== soak summary ==")
  log(`command: npm run soak -- --minutes ${MINUTES}${process.argv.slice(2).filter((a, i, all) => a !== "--minutes" && all[i - 1] !== "--minutes" && !a.startsWith("--minutes=")).map((a) => ` ${a}`).join("")}`)
  log(`load: ${(loadS / 60).toFixed(1)} min after ${setupS.toFixed(1)} s of setup; ${samples.length} samples, one every ${SAMPLE_S} s`)
  log(
    `traffic: ${CLIENTS} clients paced to <= ${RPS} req/s (60% GET, 30% POST 16-512 B, 5% relay to another instance, 5% GET on a 2nd namespace); ` +
      `ids: ${HOT_IDS} hot + ${fmt(load.coldIdsTouched)} distinct rotating ids (a window of ${fmt(IDS)} sliding ${ROTATE_PER_S}/s)`
  )
  log(`workers: ${WORKERS} kept alive (idle timeout ${IDLE_MS} ms); ${churned.SIGTERM + churned.SIGKILL} replaced by new worker ids (${churned.SIGTERM} SIGTERM, ${churned.SIGKILL} SIGKILL); slowest graceful stop ${maxTerm}`)
  log(`requests: ${fmt(total.requests)} (${(total.requests / loadS).toFixed(0)}/s): ${statusList || "none"}; client errors: ${errorList}`)
  log(
    `websockets: ${fmt(wsTotal.opened)} opened, ${fmt(wsTotal.echoes)} echoes; upgrades refused: ${wsMap(wsTotal.refused)}; ` +
      `cut by churn (close code): ${wsMap(wsTotal.cut)}; handshake errors: ${wsMap(wsTotal.errors)}`
  )
  log(`memory compared: ${windows.label}; tolerance 10%`)
  log(comparisonLine(rssCmp, megabytes))
  log(comparisonLine(redisCmp, megabytes))
  if (HEAP) log(comparisonLine(heapCmp, megabytes, false))
  if (HEAP) log(comparisonLine(heapLowCmp, megabytes, false))
  log(comparisonLine(keysCmp, plain, false))
  log(comparisonLine(fdsCmp, plain, false))
  log(`pinboard printed ${fmt(pinboard.child.lineCount)} log lines${pinboard.child.lineCount === 0 ? "" : `; the last:\n${lastLines(pinboard.child, 5)}`}`)
  const workerLines = everyWorker.reduce((n, w) => n + Math.max(0, w.lineCount - 1), 0)
  const chattiest = [...everyWorker].sort((a, b) => b.lineCount - a.lineCount)[0]
  log(
    `workers printed ${fmt(workerLines)} log lines besides their ready line` +
      (chattiest === undefined || workerLines === 0 ? "" : `; the last of ${chattiest.name}:\n${lastLines(chattiest, 5)}`)
  )
  for (const problem of problems) log(`BROKEN: ${problem}`)
  if (growing.length > 0) {
    log("")
    log("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!")
    for (const c of growing) log(`!!! MEMORY GROWING: ${c.name} x${c.ratio!.toFixed(3)} (${megabytes(c.first)} -> ${megabytes(c.last)})`)
    log("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!")
  }
  const verdict =
    growing.length > 0
      ? `GROWING (${growing.map((c) => c.name).join(", ")})`
      : judged
        ? `memory levels off (pinboard RSS x${rssCmp.ratio!.toFixed(3)}, redis used_memory x${redisCmp.ratio!.toFixed(3)})`
        : "too short to judge memory"
  log(`verdict: ${verdict}${problems.length > 0 ? `; BROKEN (${problems.length} problem${problems.length === 1 ? "" : "s"})` : ""}`)
  return growing.length > 0 || problems.length > 0 ? 1 : 0
}

const finish = async (code: number) => {
  await redisClient?.quit().catch(() => undefined)
  for (const child of workers) await stopChild(child, "SIGKILL", 0)
  killAllSync()
  await redis?.stop()
  rmSync(dir, { recursive: true, force: true })
  process.exit(code)
}

main().then(finish, (error: unknown) => {
  process.stderr.write(`soak: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
  for (const problem of problems) process.stderr.write(`BROKEN: ${problem}\n`)
  void finish(1)
})
