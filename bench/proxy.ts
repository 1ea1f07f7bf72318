// Data-plane throughput: Pinboard on Redis against the worker direct, node-http-proxy and a
// bare undici proxy, interleaved in one run; then the cluster row: Pinboard on a Redis
// Cluster, 1 process against 3.
//
//   npm run bench                              2 rounds, 5 s windows after a 1 s warm-up
//   npm run bench -- --rounds=1 --seconds=8    other rounds or windows
//   npm run bench -- --floors                  two more targets: bench/undiciProxy.ts with one
//                                              EVALSHA per request, and with one Effect fiber too
//   npm run bench -- --observability           two more targets: Pinboard with metrics on, and
//                                              with metrics and the access log (HTTP scenarios)
//   npm run bench -- --compare=<dir>/dist/main.js
//                                              one more target: another build of Pinboard (an
//                                              earlier commit's, built elsewhere), in the same rounds
//   npm run bench -- --no-cluster              without the cluster row
//   npm run bench -- --cluster-only            only the cluster row, with the single-redis-server
//                                              Pinboard measured beside it
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
// `--observability` (bench/proxyObserved.ts): what metrics and the access log cost on the hot
// path. Two more Pinboard processes on the same redis-server and worker, on core 1, measured
// in the same interleaved rounds in the GET scenarios (not WebSocket echo, whose messages are
// neither counted nor logged): "metrics on" (PINBOARD_METRICS_PORT, a free port) and "metrics
// + access log" (PINBOARD_ACCESS_LOG=1 as well; its stdout is read by this process on core 0,
// as every target's is, and its access lines are counted, not kept). Prints the ratios against
// the plain Pinboard (req/s, p99, and Pinboard's CPU per request), then one scrape of each
// one's /metrics: the sum of pinboard_requests_total, and the access lines read. Not in the
// default run, which it would take past 6 minutes (about 55 s more per round).
//
// The cluster row (bench/proxyCluster.ts), after the main tables: the 64-byte GET at 32 and
// 128 connections through 1 and through 3 Pinboards on one 3-master Redis Cluster, started
// only then, its nodes and the Pinboards on core 1 as well, the load still one process on
// core 0 (split in thirds over the 3 Pinboards). With 2 cores the 3 Pinboards share core 1,
// so 3-vs-1 shows the overhead of replicas on one cluster, not a scale-out speedup.
//
// Prints figures and the ratios against the targets; it is not a test. It exits non-zero
// only when something is broken (errors, non-2xx answers), never for a missed target.
import { availableParallelism } from "node:os"
import type { RedisCluster } from "../test/support/RedisCluster.js"
import { startRedisServer, type RedisServer } from "../test/support/RedisServer.js"
import { measureLoad } from "./measure.js"
import { hasTaskset, pinPid, stopAll, stopAllSync } from "./processes.js"
import { clusterReport, placeOnCluster, runCluster, startClusterRig, type ClusterCell } from "./proxyCluster.js"
import { observabilityReport, startObservedPinboards } from "./proxyObserved.js"
import { cpuText, fmt, ms, broken, report, type Cell, type Scenario } from "./proxyReport.js"
import {
  checkTargets,
  IDS,
  LEASE_MS,
  LOAD_CORE,
  measuredIn,
  NAMESPACE,
  originOf,
  register,
  SERVER_CORE,
  startServers,
  TARGET_LABELS,
  usesRedis,
  waitForPlacements,
  type Registration,
  type Servers,
  type TargetName
} from "./proxyTargets.js"
import { numberArg, textArg, flagArg } from "./args.js"

const ROUNDS = Math.round(numberArg("rounds", 2))
const WINDOW_S = numberArg("seconds", 5)
const WARMUP_S = numberArg("warmup", 1)
const FLOORS = flagArg("floors")
const CLUSTER_ONLY = flagArg("cluster-only")
const CLUSTER = !flagArg("no-cluster")
const OBSERVABILITY = flagArg("observability")
const COMPARE = textArg("compare")
if (CLUSTER_ONLY && !CLUSTER) throw new Error("--cluster-only and --no-cluster exclude each other")
if (CLUSTER_ONLY && OBSERVABILITY) throw new Error("--cluster-only and --observability exclude each other")
const SCENARIOS: ReadonlyArray<Scenario> = [
  { key: "64 B/32", title: "64-byte GET, 32 connections", kind: "http", path: "small", connections: 32 },
  { key: "64 B/128", title: "64-byte GET, 128 connections", kind: "http", path: "small", connections: 128 },
  { key: "64 KiB/32", title: "64 KiB GET, 32 connections", kind: "http", path: "large", connections: 32 },
  { key: "64 KiB/128", title: "64 KiB GET, 128 connections", kind: "http", path: "large", connections: 128 },
  { key: "WS/16", title: "WebSocket echo, 16 connections, one message in flight each", kind: "ws", path: "ws", connections: 16 }
]
/** The cluster row's: the 64-byte GETs. */
const CLUSTER_SCENARIOS: ReadonlyArray<Scenario> = [SCENARIOS[0]!, SCENARIOS[1]!]
/** Windows of the run: every target in every scenario (and the cluster row's 3 targets), each round. */
const WINDOWS =
  ROUNDS * (CLUSTER_ONLY ? 0 : SCENARIOS.length * (4 + (FLOORS ? 2 : 0) + (OBSERVABILITY ? 2 : 0) + (COMPARE === undefined ? 0 : 1))) +
  ROUNDS * (CLUSTER ? CLUSTER_SCENARIOS.length * 3 : 0)
/** Whatever happens, the run ends (and every process it started with it) after this: twice its windows' time, and start-ups. */
const HARD_LIMIT_MS = 180_000 + WINDOWS * 2 * (WARMUP_S + WINDOW_S + 1) * 1000

// ---------------------------------------------------------------------------------------
// One measurement: a load-generator process on LOAD_CORE, the servers' CPU read around its window

const measure = (servers: Servers, scenario: Scenario, target: TargetName, warmupS: number, seconds: number) => {
  const proxy = servers.proxyPid[target]
  return measureLoad(
    `${TARGET_LABELS[target]}, ${scenario.title}`,
    {
      kind: scenario.kind,
      origins: [originOf(servers.origins, target)],
      paths: IDS.map((id) => `${NAMESPACE}/${id}/${scenario.path}`),
      connections: scenario.connections,
      warmupS,
      seconds
    },
    { proxy: proxy === undefined ? [] : [proxy], worker: servers.worker.pid, redis: usesRedis(target) ? [servers.redis.pid] : [] },
    [
      servers.worker,
      servers.pinboard,
      servers.httpProxy,
      servers.undici,
      ...servers.floors,
      ...servers.observed.map((started) => started.proc),
      ...(servers.compare === undefined ? [] : [servers.compare.proc])
    ]
  )
}

// ---------------------------------------------------------------------------------------
// Run and report

const run = async (servers: Servers): Promise<{ healthy: boolean; cells: ReadonlyArray<Cell> }> => {
  // Untimed first pass over every target, so every process has its code warm.
  for (const target of servers.targets) {
    await measure(servers, SCENARIOS[1]!, target, 1, 1)
    if (measuredIn(target, "ws")) await measure(servers, SCENARIOS[4]!, target, 0.5, 0.5)
  }
  const cells: Array<Cell> = []
  const nameWidth = Math.max(...servers.targets.map((target) => target.length))
  for (let round = 1; round <= ROUNDS; round++) {
    for (const scenario of SCENARIOS) {
      const targets = servers.targets.filter((target) => measuredIn(target, scenario.kind))
      const order = round % 2 === 1 ? targets : [...targets].reverse()
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
  const healthy = report(cells, SCENARIOS, servers.targets, ROUNDS)
  const observedHealthy = servers.observed.length === 0 || (await observabilityReport(servers.observed, cells, SCENARIOS))
  return { healthy: healthy && observedHealthy, cells }
}

/** The cluster row, with the single-redis-server Pinboard's cells of the main tables when there are any. */
const runClusterRow = async (servers: Servers, main: ReadonlyArray<Cell>): Promise<boolean> => {
  const rig = await startClusterRig((started) => {
    cluster = started
  })
  console.log(
    `cluster: redis-server pids ${rig.masterPids.join(", ")} (${rig.cluster.seeds}), ${hasTaskset ? `on core ${SERVER_CORE}` : "not pinned"}; ` +
      `Pinboard pids ${rig.pinboards.map((pinboard) => pinboard.proc.pid).join(", ")}`
  )
  clusterRegistration = await placeOnCluster(rig, servers.origins.direct)
  const single: Array<ClusterCell> = main
    .filter((c) => c.target === "pinboard" && CLUSTER_SCENARIOS.includes(c.scenario))
    .map((c) => ({ ...c, target: "single" }))
  const measured = await runCluster(rig, servers, {
    scenarios: CLUSTER_SCENARIOS,
    rounds: ROUNDS,
    warmupS: WARMUP_S,
    windowS: WINDOW_S,
    withSingle: single.length === 0
  })
  const healthy = clusterReport([...single, ...measured], CLUSTER_SCENARIOS, ROUNDS, single.length > 0)
  for (const { proc } of rig.pinboards) {
    const lines = proc.lines.filter((line) => !line.includes("pinboard listening on"))
    if (lines.length === 0) continue
    console.log(`${proc.name} printed ${lines.length} lines besides its start (last 5 of them):`)
    for (const line of lines.slice(-5)) console.log(`  ${line}`)
  }
  return healthy
}

// ---------------------------------------------------------------------------------------
// Entry: every process is stopped by its pid on every way out.

let redis: RedisServer | undefined
let cluster: RedisCluster | undefined
const stopEverythingSync = () => {
  stopAllSync()
  redis?.stopSync()
  cluster?.stopSync()
}
let stopping = false
/** Kills everything at once, then waits a moment for the exits so that no zombie is left. */
const stopAndExit = (code: number) => {
  stopping = true
  stopEverythingSync()
  const reaped = Promise.allSettled([stopAll(), redis?.stop(), cluster?.stop()])
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
let clusterRegistration: Registration | undefined
let servers: Servers | undefined
try {
  const cpus = availableParallelism()
  // This process only heartbeats and waits: it stays off the servers' core.
  pinPid(process.pid, LOAD_CORE)
  redis = await startRedisServer()
  pinPid(redis.pid, SERVER_CORE)
  const observed = OBSERVABILITY ? await startObservedPinboards(redis) : []
  servers = await startServers(redis, { floors: FLOORS, observed, ...(COMPARE === undefined ? {} : { compare: COMPARE }) })
  const extraNames = [...servers.floors, ...observed.map((started) => started.proc)].map((proc) => `, ${proc.name}`).join("")
  const extraPids =
    servers.floors.map((floor) => `; ${floor.name} pid ${floor.pid}`).join("") +
    servers.observed.map(({ target, proc, metricsOrigin }) => `; ${TARGET_LABELS[target]} pid ${proc.pid} (${metricsOrigin}/metrics)`).join("")
  console.log(
    `${cpus} CPUs; ${hasTaskset ? `load generator (autocannon, ws) on core ${LOAD_CORE}; redis-server, worker, Pinboard, node-http-proxy, undici proxy${extraNames} on core ${SERVER_CORE}` : "taskset not found: nothing pinned, the ratios are not comparable"}`
  )
  console.log(
    `redis-server pid ${redis.pid} :${redis.port}; worker pid ${servers.worker.pid}; Pinboard pid ${servers.pinboard.pid} (lease ${LEASE_MS} ms);` +
      ` node-http-proxy pid ${servers.httpProxy.pid}; undici proxy pid ${servers.undici.pid}${extraPids}`
  )
  registration = await register(servers.origins.pinboard, servers.origins.direct)
  console.log(await waitForPlacements(servers.origins.pinboard))
  for (const { target, origin } of servers.observed) console.log(`${TARGET_LABELS[target]}: ${await waitForPlacements(origin)}`)
  await checkTargets(servers)
  console.log(`every target answers 64 B, 64 KiB and echoes; ${ROUNDS} rounds, windows of ${WINDOW_S} s after ${WARMUP_S} s of warm-up`)
  console.log("")
  const main = CLUSTER_ONLY ? { healthy: true, cells: [] } : await run(servers)
  if (CLUSTER) console.log("")
  const clusterHealthy = CLUSTER ? await runClusterRow(servers, main.cells) : true
  console.log("")
  const heartbeats = (name: string, { stats }: Registration) =>
    console.log(`heartbeats (${name}): ${stats.beats} ok, ${stats.failed} failed, ${stats.reregistered} re-registrations, slowest ${stats.slowestMs.toFixed(1)} ms`)
  heartbeats("redis-server", registration)
  if (clusterRegistration !== undefined) heartbeats("cluster", clusterRegistration)
  if (servers.pinboard.lines.length > 0) {
    console.log(`Pinboard printed ${servers.pinboard.lines.length} lines (last 10 of them):`)
    for (const line of servers.pinboard.lines.slice(-10)) console.log(`  ${line}`)
  }
  for (const { target, otherLines } of servers.observed) {
    if (otherLines.length === 0) continue
    console.log(`${TARGET_LABELS[target]}'s last ${otherLines.length} lines besides access lines:`)
    for (const line of otherLines) console.log(`  ${line}`)
  }
  console.log(`total ${((performance.now() - started) / 1000).toFixed(1)} s`)
  if (!main.healthy || !clusterHealthy) process.exitCode = 1
} catch (error) {
  if (stopping) console.error("bench: stopped")
  else console.error("bench failed:", error)
  process.exitCode = 1
} finally {
  registration?.stop()
  clusterRegistration?.stop()
  await stopAll()
  await redis?.stop()
  await cluster?.stop()
  clearTimeout(hardLimit)
}
