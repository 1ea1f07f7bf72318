// Data-plane throughput: Pinboard on Redis against the worker direct, node-http-proxy and a
// bare undici proxy, interleaved in one run.
//
//   npm run bench                              2 rounds, 5 s windows after a 1 s warm-up
//   npm run bench -- --rounds=1 --seconds=8    other rounds or windows
//   npm run bench -- --floors                  two more targets: bench/undiciProxy.ts with one
//                                              EVALSHA per request, and with one Effect fiber too
//
// Scenarios: a 64-byte and a 64 KiB GET at 32 and 128 connections (autocannon; wrk is not
// used), and WebSocket echo at 16 connections with one message in flight each. For each
// scenario every target is measured back to back (the order reversed every other round),
// and the whole round is run again. The load generator (bench/load.ts, one process per
// measurement) runs on core 0, redis-server, the worker (bench/worker.ts), Pinboard
// (`dist/main.js`) and the two comparison proxies (bench/nodeHttpProxy.ts,
// bench/undiciProxy.ts) each as their own process on core 1: the ratios depend on that
// layout (bench/proxyTargets.ts starts them). Every target serves the same paths,
// `/bench/<id>/small|large|ws`; through Pinboard the ids are placed (past the registry's
// cold start) before anything is measured. bench/proxyReport.ts prints the tables.
//
// Prints figures and the ratios against the targets; it is not a test. It exits non-zero
// only when something is broken (errors, non-2xx answers), never for a missed target.
import { availableParallelism } from "node:os"
import { startRedisServer, type RedisServer } from "../test/support/RedisServer.js"
import type { LoadResult, LoadSpec } from "./load.js"
import { cpuSeconds, hasTaskset, pinPid, spawnNode, stop, stopAll, stopAllSync } from "./processes.js"
import { cpuText, fmt, ms, broken, report, type Cell, type Scenario } from "./proxyReport.js"
import {
  checkTargets,
  IDS,
  LEASE_MS,
  LOAD_CORE,
  NAMESPACE,
  originOf,
  register,
  script,
  SERVER_CORE,
  startServers,
  TARGET_LABELS,
  usesRedis,
  waitForPlacements,
  type Registration,
  type Servers,
  type TargetName
} from "./proxyTargets.js"

const argv = process.argv.slice(2)
const numberArg = (name: string, fallback: number): number => {
  const raw = argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
  const value = raw === undefined ? fallback : Number(raw)
  if (!(value > 0)) throw new Error(`--${name}= expects a positive number`)
  return value
}
const ROUNDS = Math.round(numberArg("rounds", 2))
const WINDOW_S = numberArg("seconds", 5)
const WARMUP_S = numberArg("warmup", 1)
const FLOORS = argv.includes("--floors")
/** Whatever happens, the run ends (and every process it started with it) after this. */
const HARD_LIMIT_MS = 420_000

const SCENARIOS: ReadonlyArray<Scenario> = [
  { key: "64 B/32", title: "64-byte GET, 32 connections", kind: "http", path: "small", connections: 32 },
  { key: "64 B/128", title: "64-byte GET, 128 connections", kind: "http", path: "small", connections: 128 },
  { key: "64 KiB/32", title: "64 KiB GET, 32 connections", kind: "http", path: "large", connections: 32 },
  { key: "64 KiB/128", title: "64 KiB GET, 128 connections", kind: "http", path: "large", connections: 128 },
  { key: "WS/16", title: "WebSocket echo, 16 connections, one message in flight each", kind: "ws", path: "ws", connections: 16 }
]

// ---------------------------------------------------------------------------------------
// One measurement: a load-generator process on LOAD_CORE, the servers' CPU read around its window

const measure = async (servers: Servers, scenario: Scenario, target: TargetName, warmupS: number, seconds: number) => {
  const spec: LoadSpec = {
    kind: scenario.kind,
    origin: originOf(servers.origins, target),
    paths: IDS.map((id) => `${NAMESPACE}/${id}/${scenario.path}`),
    connections: scenario.connections,
    warmupS,
    seconds
  }
  const proxyPid = servers.proxyPid[target]
  const pids = { proxy: proxyPid, worker: servers.worker.pid, redis: usesRedis(target) ? servers.redis.pid : undefined }
  const read = () => ({
    proxy: pids.proxy === undefined ? undefined : cpuSeconds(pids.proxy),
    worker: cpuSeconds(pids.worker),
    redis: pids.redis === undefined ? undefined : cpuSeconds(pids.redis)
  })
  let before = read()
  let after = before
  const load = spawnNode("load generator", LOAD_CORE, script("load.js"), [JSON.stringify(spec)])
  load.onLine((line) => {
    if (line === "window start") before = read()
    else if (line === "window end") after = read()
  })
  const limit = setTimeout(() => void stop(load), (warmupS + seconds + 30) * 1000)
  const code = await load.exited
  clearTimeout(limit)
  const json = [...load.lines].reverse().find((line) => line.startsWith("{"))
  if (code !== 0 || json === undefined) {
    throw new Error(`load generator for ${TARGET_LABELS[target]}, ${scenario.title}: exit ${code}; output:\n${load.lines.join("\n")}`)
  }
  for (const proc of [servers.worker, servers.pinboard, servers.httpProxy, servers.undici, ...servers.floors]) {
    if (!proc.alive()) throw new Error(`${proc.name} exited; output:\n${proc.lines.join("\n")}`)
  }
  const result = JSON.parse(json) as LoadResult
  const coreShare = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? 0 : (a - b) / result.seconds)
  const cpu = {
    ...(pids.proxy === undefined ? {} : { proxy: coreShare(after.proxy, before.proxy) }),
    worker: coreShare(after.worker, before.worker),
    ...(pids.redis === undefined ? {} : { redis: coreShare(after.redis, before.redis) })
  }
  return { result, cpu }
}

// ---------------------------------------------------------------------------------------
// Run and report

const run = async (servers: Servers): Promise<boolean> => {
  // Untimed first pass over every target, so every process has its code warm.
  for (const target of servers.targets) {
    await measure(servers, SCENARIOS[1]!, target, 1, 1)
    await measure(servers, SCENARIOS[4]!, target, 0.5, 0.5)
  }
  const cells: Array<Cell> = []
  const nameWidth = Math.max(...servers.targets.map((target) => target.length))
  for (let round = 1; round <= ROUNDS; round++) {
    for (const scenario of SCENARIOS) {
      const order = round % 2 === 1 ? servers.targets : [...servers.targets].reverse()
      for (const target of order) {
        const { result, cpu } = await measure(servers, scenario, target, WARMUP_S, WINDOW_S)
        cells.push({ scenario, target, round, result, cpu })
        console.log(
          `round ${round}  ${scenario.key.padEnd(10)}  ${target.padEnd(nameWidth)}  ${fmt(result.perSecond).padStart(7)}/s` +
            `  p50 ${ms(result.p50)}  p99 ${ms(result.p99)} ms  errors ${broken(result)}  core 1: ${cpuText(cpu)}`
        )
      }
    }
  }
  return report(cells, SCENARIOS, servers.targets, ROUNDS)
}

// ---------------------------------------------------------------------------------------
// Entry: every process is stopped by its pid on every way out.

let redis: RedisServer | undefined
const stopEverythingSync = () => {
  stopAllSync()
  redis?.stopSync()
}
let stopping = false
/** Kills everything at once, then waits a moment for the exits so that no zombie is left. */
const stopAndExit = (code: number) => {
  stopping = true
  stopEverythingSync()
  const reaped = Promise.allSettled([stopAll(), redis?.stop()])
  void Promise.race([reaped, new Promise((resolve) => setTimeout(resolve, 2000))]).finally(() => process.exit(code))
}
const hardLimit = setTimeout(() => {
  console.error(`bench: over ${HARD_LIMIT_MS / 1000} s, stopping`)
  stopAndExit(1)
}, HARD_LIMIT_MS)
hardLimit.unref()
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => stopAndExit(130))
process.once("exit", stopEverythingSync)

const started = performance.now()
let registration: Registration | undefined
let servers: Servers | undefined
try {
  const cpus = availableParallelism()
  // This process only heartbeats and waits: it stays off the servers' core.
  pinPid(process.pid, LOAD_CORE)
  redis = await startRedisServer()
  pinPid(redis.pid, SERVER_CORE)
  servers = await startServers(redis, FLOORS)
  const floorNames = servers.floors.map((floor) => `, ${floor.name}`).join("")
  const floorPids = servers.floors.map((floor) => `; ${floor.name} pid ${floor.pid}`).join("")
  console.log(
    `${cpus} CPUs; ${hasTaskset ? `load generator (autocannon, ws) on core ${LOAD_CORE}; redis-server, worker, Pinboard, node-http-proxy, undici proxy${floorNames} on core ${SERVER_CORE}` : "taskset not found: nothing pinned, the ratios are not comparable"}`
  )
  console.log(
    `redis-server pid ${redis.pid} :${redis.port}; worker pid ${servers.worker.pid}; Pinboard pid ${servers.pinboard.pid} (lease ${LEASE_MS} ms);` +
      ` node-http-proxy pid ${servers.httpProxy.pid}; undici proxy pid ${servers.undici.pid}${floorPids}`
  )
  registration = await register(servers.origins.pinboard, servers.origins.direct)
  console.log(await waitForPlacements(servers.origins.pinboard))
  await checkTargets(servers)
  console.log(`every target answers 64 B, 64 KiB and echoes; ${ROUNDS} rounds, windows of ${WINDOW_S} s after ${WARMUP_S} s of warm-up`)
  console.log("")
  const healthy = await run(servers)
  const beats = registration.stats
  console.log("")
  console.log(`heartbeats: ${beats.beats} ok, ${beats.failed} failed, ${beats.reregistered} re-registrations, slowest ${beats.slowestMs.toFixed(1)} ms`)
  if (servers.pinboard.lines.length > 0) {
    console.log(`Pinboard printed ${servers.pinboard.lines.length} lines (last 10 of them):`)
    for (const line of servers.pinboard.lines.slice(-10)) console.log(`  ${line}`)
  }
  console.log(`total ${((performance.now() - started) / 1000).toFixed(1)} s`)
  if (!healthy) process.exitCode = 1
} catch (error) {
  if (stopping) console.error("bench: stopped")
  else console.error("bench failed:", error)
  process.exitCode = 1
} finally {
  registration?.stop()
  await stopAll()
  await redis?.stop()
  clearTimeout(hardLimit)
}
