// Data-plane throughput: Pinboard on Redis against the worker direct, node-http-proxy and a
// bare undici proxy, interleaved in one run; then the cluster row: Pinboard on a Redis
// Cluster, 1 process against 3. HTTP load comes from wrk, as users measure.
//
//   npm run bench                              2 rounds, 8 s windows after a 1 s warm-up: about
//                                              14 minutes (36 windows a round, then the cluster row)
//   npm run bench -- --rounds=3 --seconds=5    other rounds or windows (whole seconds: wrk's -d)
//   npm run bench -- --floors                  two more targets: bench/undiciProxy.ts with one
//                                              EVALSHA per request, and with one Effect fiber too
//                                              (`--floors --no-cluster --rounds=3`: about 26 minutes)
//   npm run bench -- --observability           two more targets: Pinboard with metrics on, and
//                                              with metrics and the access log (HTTP scenarios)
//   npm run bench -- --compare=<dir>/dist/main.js
//                                              one more target: another build of Pinboard (an
//                                              earlier commit's, built elsewhere), in the same rounds
//   npm run bench -- --compare-flags=--max-semi-space-size=64
//                                              the --compare target run with these Node flags
//                                              (comma-separated; this build unless --compare= names
//                                              another): docs/deploy.md "Node's young generation"
//   npm run bench -- --no-cluster              without the cluster row
//   npm run bench -- --scenarios="64 B/32,64 KiB/32"
//                                              only these scenarios (the keys the report prints)
//   npm run bench -- --cluster-only            only the cluster row, with the single-redis-server
//                                              Pinboard measured beside it
//
// `npm run bench` installs Debian's wrk first when it is missing (apt-get), as .ci/run does
// its tools; run directly, this script stops at once without it.
//
// Scenarios: a 64-byte, a 64 KiB and a 1 MiB GET, and a 64 KiB POST (the worker reads the
// whole body, streamed through the proxy, and answers 64 bytes), each at 32 and 128
// connections; and WebSocket echo at 16 connections with one message in flight each. For
// each scenario every target is measured back to back (the order reversed every other
// round), and the whole round is run again. Every target serves the same paths,
// `/bench/<id>/small|large|huge|upload|ws`, over the ids of proxyTargets.ts's IDS; through
// Pinboard they are placed (past the registry's cold start) before anything is measured.
//
// Load: HTTP by wrk (bench/wrk.ts): `wrk -t1 -c<connections> -d<window>s --latency` pinned
// to core 0 with taskset, a Lua script written to a temp file rotating the request path over
// the ids (and setting the method and body of the POST); one wrk run for the warm-up, then
// one for the window. The figures are wrk's own output, parsed: Requests/sec, the latency
// distribution's 50% and 99%, the Max latency, the socket errors and the "Non-2xx or 3xx
// responses" (wrk counts status > 399 there; no target answers 3xx, and fewer bytes per
// response than the body counts as broken too). WebSocket echo keeps the Node client
// (bench/load.ts), on core 0 as well. redis-server, the worker (bench/worker.ts), Pinboard
// (`dist/main.js`) and the comparison proxies (bench/nodeHttpProxy.ts, bench/undiciProxy.ts)
// each run as their own process on core 1: the ratios depend on that layout
// (bench/proxyTargets.ts starts them).
//
// CPU (bench/measure.ts): around each window, the CPU time of the proxy, the worker and
// redis-server from /proc/<pid>/stat, given per request; the load generator's (wrk's own,
// from its done()); and every other process's on the machine: /proc/stat's busy time less
// all of those and this process (on a quiet machine 0.05 to 0.15 of a core: idle targets,
// kernel threads, tick sampling). A window whose "other" is above 0.2 of a core is marked `!`
// with the busiest other processes named: it ran beside something else; repeat the run if
// the medians lean on it.
// bench/proxyReport.ts prints the tables (medians over the rounds), Pinboard's ratios to
// the floors and to node-http-proxy, and the targets of docs/proxy.md, never asserted.
//
// `--observability` (bench/proxyObserved.ts): what metrics and the access log cost on the hot
// path. Two more Pinboard processes on the same redis-server and worker, on core 1, measured
// in the same interleaved rounds in the HTTP scenarios (not WebSocket echo, whose messages are
// neither counted nor logged): "metrics on" (PINBOARD_METRICS_PORT, a free port) and "metrics
// + access log" (PINBOARD_ACCESS_LOG=1 as well; its stdout is read by this process on core 0,
// as every target's is, and its access lines are counted, not kept). Prints the ratios against
// the plain Pinboard (req/s, p99, and Pinboard's CPU per request), then one scrape of each
// one's /metrics: the sum of pinboard_requests_total, and the access lines read. Not in the
// default run: it adds 16 windows a round (about 2.5 minutes).
//
// The cluster row (bench/proxyCluster.ts), after the main tables: the 64-byte GET at 32 and
// 128 connections through 1 and through 3 Pinboards on one 3-master Redis Cluster, started
// only then, its nodes and the Pinboards on core 1 as well, the load still one wrk process
// on core 0 (one thread per Pinboard for the 3, each with a third of the connections). With 2
// cores the 3 Pinboards share core 1, so 3-vs-1 shows the overhead of replicas on one
// cluster, not a scale-out speedup.
//
// Prints figures and the ratios against the targets; it is not a test. It exits non-zero
// only when something is broken (socket errors, timeouts, non-2xx answers, short answers),
// never for a missed target.
import { availableParallelism } from "node:os"
import type { RedisCluster } from "../test/support/RedisCluster.js"
import { startRedisServer, type RedisServer } from "../test/support/RedisServer.js"
import { measureHttp, measureLoad, type Measured } from "./measure.js"
import { hasTaskset, peakRssKiB, pinPid, stopAll, stopAllSync, stopOnEveryExit } from "./processes.js"
import { clusterReport, placeOnCluster, runCluster, startClusterRig, type ClusterCell } from "./proxyCluster.js"
import { observabilityReport, startObservedPinboards } from "./proxyObserved.js"
import { cpuText, fmt, ms, broken, report, type Cell, type Scenario } from "./proxyReport.js"
import {
  ANSWERS,
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
import { hasWrk } from "./wrk.js"

const ROUNDS = Math.round(numberArg("rounds", 2))
const WINDOW_S = numberArg("seconds", 8)
const WARMUP_S = numberArg("warmup", 1)
const FLOORS = flagArg("floors")
const CLUSTER_ONLY = flagArg("cluster-only")
const CLUSTER = !flagArg("no-cluster")
const OBSERVABILITY = flagArg("observability")
const COMPARE_FLAGS = textArg("compare-flags")?.split(",").filter((flag) => flag !== "") ?? []
const COMPARE = textArg("compare") ?? (COMPARE_FLAGS.length > 0 ? new URL("../../dist/main.js", import.meta.url).pathname : undefined)
if (CLUSTER_ONLY && !CLUSTER) throw new Error("--cluster-only and --no-cluster exclude each other")
if (CLUSTER_ONLY && OBSERVABILITY) throw new Error("--cluster-only and --observability exclude each other")
if (!Number.isInteger(WINDOW_S) || !Number.isInteger(WARMUP_S)) throw new Error("--seconds= and --warmup= take whole seconds (wrk's -d)")
if (!hasWrk()) {
  throw new Error("wrk is not installed: `apt-get install -y wrk` (npm run bench installs it when it is missing)")
}
/** The HTTP scenarios' requests: what bench/worker.ts answers, in proxyTargets.ts's ANSWERS. */
const http = (key: string, title: string, path: Scenario["path"], connections: number): Scenario => {
  const answer = ANSWERS.find((a) => a.path === path)!
  return { key: `${key}/${connections}`, title: `${title}, ${connections} connections`, kind: "http", path, method: answer.method, bodyBytes: answer.bodyBytes, answerBytes: answer.answerBytes, connections }
}
const ALL_SCENARIOS: ReadonlyArray<Scenario> = [
  http("64 B", "64-byte GET", "small", 32),
  http("64 B", "64-byte GET", "small", 128),
  http("64 KiB", "64 KiB GET", "large", 32),
  http("64 KiB", "64 KiB GET", "large", 128),
  http("1 MiB", "1 MiB GET", "huge", 32),
  http("1 MiB", "1 MiB GET", "huge", 128),
  http("POST 64 KiB", "64 KiB POST (answered with 64 bytes)", "upload", 32),
  http("POST 64 KiB", "64 KiB POST (answered with 64 bytes)", "upload", 128),
  {
    key: "WS/16",
    title: "WebSocket echo, 16 connections, one message in flight each",
    kind: "ws",
    path: "ws",
    method: "GET",
    bodyBytes: 64,
    answerBytes: 64,
    connections: 16
  }
]
const WS_SCENARIO = ALL_SCENARIOS.find((s) => s.kind === "ws")!
/** `--scenarios=64 B/32,64 KiB/32`: only these (their keys, as the report prints them). */
const ONLY = textArg("scenarios")?.split(",")
const SCENARIOS = ONLY === undefined ? ALL_SCENARIOS : ALL_SCENARIOS.filter((s) => ONLY.includes(s.key))
if (SCENARIOS.length === 0) throw new Error(`--scenarios= names none of ${ALL_SCENARIOS.map((s) => s.key).join(", ")}`)
/** The cluster row's: the 64-byte GETs. */
const CLUSTER_SCENARIOS: ReadonlyArray<Scenario> = ALL_SCENARIOS.filter((s) => s.path === "small")
/** Windows of the run: every target in every scenario (and the cluster row's 3 targets), each round. */
const WINDOWS =
  ROUNDS * (CLUSTER_ONLY ? 0 : SCENARIOS.length * (4 + (FLOORS ? 2 : 0) + (OBSERVABILITY ? 2 : 0) + (COMPARE === undefined ? 0 : 1))) +
  ROUNDS * (CLUSTER ? CLUSTER_SCENARIOS.length * 3 : 0)
/** Whatever happens, the run ends (and every process it started with it) after this: twice its windows' time, and start-ups. */
const HARD_LIMIT_MS = 180_000 + WINDOWS * 2 * (WARMUP_S + WINDOW_S + 1) * 1000

// ---------------------------------------------------------------------------------------
// One measurement: wrk (HTTP) or the Node client (WebSocket) on LOAD_CORE, the servers' CPU read around its window

const measure = (servers: Servers, scenario: Scenario, target: TargetName, warmupS: number, seconds: number): Promise<Measured> => {
  const proxy = servers.proxyPid[target]
  const label = `${TARGET_LABELS[target]}, ${scenario.title}`
  const origins = [originOf(servers.origins, target)]
  const paths = IDS.map((id) => `${NAMESPACE}/${id}/${scenario.path}`)
  const watched = { proxy: proxy === undefined ? [] : [proxy], worker: servers.worker.pid, redis: usesRedis(target) ? [servers.redis.pid] : [] }
  const alive = [
    servers.worker,
    servers.pinboard,
    servers.httpProxy,
    servers.undici,
    ...servers.floors,
    ...servers.observed.map((started) => started.proc),
    ...(servers.compare === undefined ? [] : [servers.compare.proc])
  ]
  if (scenario.kind === "ws") {
    return measureLoad(label, { kind: "ws", origins, paths, connections: scenario.connections, warmupS, seconds }, watched, alive)
  }
  const { method, bodyBytes, connections } = scenario
  return measureHttp(label, { origins, paths, method, bodyBytes, connections, warmupS, seconds }, watched, alive)
}

// ---------------------------------------------------------------------------------------
// Run and report

const run = async (servers: Servers): Promise<{ healthy: boolean; cells: ReadonlyArray<Cell> }> => {
  // Untimed first pass over every target, so every process has its code warm.
  for (const target of servers.targets) {
    await measure(servers, SCENARIOS.find((s) => s.kind === "http") ?? ALL_SCENARIOS[1]!, target, 1, 1)
    if (measuredIn(target, "ws")) await measure(servers, WS_SCENARIO, target, 0.5, 0.5)
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
          `round ${round}  ${scenario.key.padEnd(14)}  ${target.padEnd(nameWidth)}  ${fmt(result.perSecond).padStart(7)}/s` +
            `  p50 ${ms(result.p50)}  p99 ${ms(result.p99)}  max ${ms(result.max)} ms  errors ${broken(result)}  ${cpuText(cpu)}`
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
const guard = stopOnEveryExit(HARD_LIMIT_MS, stopEverythingSync, () => Promise.all([stopAll(), redis?.stop(), cluster?.stop()]))

/** A proxy's peak resident memory, read before it is stopped. */
const peakRss = (target: TargetName, pid: number | undefined): Array<string> => {
  const kib = pid === undefined ? undefined : peakRssKiB(pid)
  return kib === undefined ? [] : [`${TARGET_LABELS[target]} ${Math.round(kib / 1024)} MB`]
}

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
  servers = await startServers(redis, { floors: FLOORS, observed, ...(COMPARE === undefined ? {} : { compare: { main: COMPARE, nodeFlags: COMPARE_FLAGS } }) })
  const extraNames = [...servers.floors, ...observed.map((started) => started.proc)].map((proc) => `, ${proc.name}`).join("")
  const extraPids =
    servers.floors.map((floor) => `; ${floor.name} pid ${floor.pid}`).join("") +
    servers.observed.map(({ target, proc, metricsOrigin }) => `; ${TARGET_LABELS[target]} pid ${proc.pid} (${metricsOrigin}/metrics)`).join("")
  console.log(
    `${cpus} CPUs; ${hasTaskset ? `load generator (wrk -t1; the Node client for WebSocket echo) on core ${LOAD_CORE}; redis-server, worker, Pinboard, node-http-proxy, undici proxy${extraNames} on core ${SERVER_CORE}` : "taskset not found: nothing pinned, the ratios are not comparable"}`
  )
  console.log(
    `redis-server pid ${redis.pid} :${redis.port}; worker pid ${servers.worker.pid}; Pinboard pid ${servers.pinboard.pid} (lease ${LEASE_MS} ms);` +
      ` node-http-proxy pid ${servers.httpProxy.pid}; undici proxy pid ${servers.undici.pid}${extraPids}`
  )
  registration = await register(servers.origins.pinboard, servers.origins.direct)
  console.log(await waitForPlacements(servers.origins.pinboard))
  for (const { target, origin } of servers.observed) console.log(`${TARGET_LABELS[target]}: ${await waitForPlacements(origin)}`)
  await checkTargets(servers)
  console.log(
    `every target answers 64 B, 64 KiB and 1 MiB, takes a 64 KiB POST whole, and echoes; ${ROUNDS} rounds, windows of ${WINDOW_S} s` +
      ` after ${WARMUP_S} s of warm-up; requests rotate over ${IDS.length} placed ids`
  )
  console.log("")
  const main = CLUSTER_ONLY ? { healthy: true, cells: [] } : await run(servers)
  if (CLUSTER) console.log("")
  const clusterHealthy = CLUSTER ? await runClusterRow(servers, main.cells) : true
  console.log("")
  const heartbeats = (name: string, { stats }: Registration) =>
    console.log(`heartbeats (${name}): ${stats.beats} ok, ${stats.failed} failed, ${stats.reregistered} re-registrations, slowest ${stats.slowestMs.toFixed(1)} ms`)
  heartbeats("redis-server", registration)
  console.log(`peak RSS: ${servers.targets.flatMap((target) => peakRss(target, servers!.proxyPid[target])).join(", ")}`)
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
  if (guard.stopping()) console.error("bench: stopped")
  else console.error("bench failed:", error)
  process.exitCode = 1
} finally {
  registration?.stop()
  clusterRegistration?.stop()
  await stopAll()
  await redis?.stop()
  await cluster?.stop()
  guard.disarm()
}
