// HTTP/2 on the data-plane listener (src/serving/Http2Server.ts): what a request costs Pinboard
// over HTTP/2 against HTTP/1.1, both over TLS. Target (the issue): Pinboard's CPU per request
// over h2 within 1.2x of HTTP/1.1 over TLS, printed, never asserted.
//
//   npm run bench:h2                              3 rounds, 5 s windows after a 1 s warm-up:
//                                                 about 2.5 minutes (6 windows a round)
//   npm run bench:h2 -- --rounds=1 --seconds=2    other rounds or windows (whole seconds: wrk's -d)
//   npm run bench:h2 -- --no-wrk                  without the wrk reference
//   npm run bench:h2 -- --cpu-prof                Pinboard under V8's sampling profiler (`node
//                                                 --cpu-prof`): after the tables, its self time per
//                                                 request by layer and by function, each case's
//                                                 windows only, h2 beside HTTP/1.1. The profiler
//                                                 costs CPU of its own: compare the cases with each
//                                                 other, not with a run without it
//   npm run bench:h2 -- --cpu-prof --keep         also keeps the .cpuprofile (path printed)
//
// `npm run bench:h2` installs Debian's nghttp2-client (h2load) and wrk first when they are
// missing (apt-get); run directly, this script stops at once without h2load.
//
// The rig, as bench/proxy.ts's (bench/proxyTargets.ts starts it): redis-server, the worker
// (bench/worker.ts) and one Pinboard (`dist/main.js`) on that redis-server, each its own
// process on core 1; the load generator on core 0 (taskset). Pinboard's data port speaks TLS
// (PINBOARD_TLS_CERT, PINBOARD_TLS_KEY: a certificate for 127.0.0.1 of test/support/TestCa.ts's
// test CA, made with openssl at start), so ALPN offers h2 and http/1.1; its registry API has a
// plain listener of its own (PINBOARD_REGISTRY_PORT), where the worker registers and
// heartbeats. Forwards to the worker are HTTP/1.1 whatever the client spoke. The requests
// rotate over the ids of proxyTargets.ts, placed (past the registry's cold start) before
// anything is measured, and every path is checked over both protocols first (200, the whole
// body, ALPN's choice).
//
// Cases: a 64-byte and a 64 KiB GET (`/bench/<id>/small|large`), 128 requests in flight:
//   h2     HTTP/2 over TLS, h2load -c16 -m8 (16 connections, 8 streams each)
//   h1     HTTP/1.1 over TLS, h2load --h1 -c128: the same load generator, the reference of the
//          ratio
//   wrk    HTTP/1.1 over TLS, wrk -c128 (bench/wrk.ts, https://): a second reference, as
//          bench/proxy.ts measures. Its warm-up is a run of its own (bench/measure.ts's
//          measureHttp), so its window holds its 128 TLS handshakes; h2load's do not (below)
// For each size the cases run back to back, the order reversed every other round; an untimed
// pass over all of them first, so that every process has its code warm.
//
// h2load (nghttp2 1.52): `h2load -t1 -c<clients> [-m<streams> | --h1] -D <window>
// --warm-up-time=<warm-up> --log-file=<tmp> <uri of every placed id>`: one process, one thread,
// each client rotating over the URIs as wrk's Lua script does. Its connections are opened in
// the warm-up and kept into the window. It prints "Main benchmark duration is started" and
// "... is over" as they happen: the servers' CPU (/proc) and h2load's own are read at those two
// lines, so a window holds only the measured requests. Figures: req/s, succeeded/failed/
// errored/timeout and the status codes from its summary; p50 and p99 from its per-request log
// (request start to end of response, for the requests of the window: h2load's summary has only
// min, max, mean and sd), mean and max from its summary (the "time for request" row); bytes
// each = its traffic total / requests done, approximate (the responses in flight at the
// window's edges: about 1% at 64 KiB). A failed, errored or timed-out request, a status other
// than 2xx or a protocol other than the one asked for is broken, and so is a byte count per
// response 2% short of the body (a body shorter than its content-length is an error of
// h2load's own; every body is checked whole over both protocols before the run).
//
// CPU (bench/measure.ts): per process from /proc around the window, given per request
// (Pinboard, the worker, redis-server); the load generator's; "other" = /proc/stat's busy time
// less all of those and this process, a window above 0.2 of a core marked `!` with the busiest
// others named (it ran beside something else: repeat the run if the medians lean on it).
//
// Prints figures and the ratio against the target; it is not a test. It exits non-zero only
// when something is broken (errors, timeouts, non-2xx, short answers), never for a missed target.
import { spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import http2 from "node:http2"
import { availableParallelism, tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, setGlobalDispatcher } from "undici"
import { freePort } from "../test/support/Ports.js"
import { killPid } from "../test/support/Processes.js"
import { startRedisServer, type RedisServer } from "../test/support/RedisServer.js"
import { makeTestCa, type TestCa } from "../test/support/TestCa.js"
import { flagArg, numberArg } from "./args.js"
import type { LoadResult } from "./load.js"
import { checkAlive, measureHttp, reading, sharesOf, type CpuShares, type Reading, type Watched } from "./measure.js"
import { cpuSeconds, hasTaskset, peakRssKiB, pinPid, spawnPinned, stop, stopAll, stopAllSync, stopOnEveryExit, type Proc } from "./processes.js"
import { broken, brokenCell, busiestText, cpuPerRequestUs, cpuText, fmt, median, ms, NOISY, share, table, us, type Scenario } from "./proxyReport.js"
import {
  ANSWERS,
  IDS,
  LEASE_MS,
  LOAD_CORE,
  placedPaths,
  register,
  SERVER_CORE,
  startPinboard,
  startWorker,
  waitForPlacements,
  waitHealthy,
  type Registration
} from "./proxyTargets.js"
import { hasWrk } from "./wrk.js"

const ROUNDS = Math.round(numberArg("rounds", 3))
const WINDOW_S = numberArg("seconds", 5)
const WARMUP_S = numberArg("warmup", 1)
const WRK = !flagArg("no-wrk")
const CPU_PROF = flagArg("cpu-prof")
const KEEP = flagArg("keep")
if (!Number.isInteger(WINDOW_S) || !Number.isInteger(WARMUP_S)) throw new Error("--seconds= and --warmup= take whole seconds (wrk's -d)")
const H2LOAD = "h2load"
if (spawnSync(H2LOAD, ["--version"], { stdio: "ignore" }).error !== undefined) {
  throw new Error("h2load is not installed: `apt-get install -y nghttp2-client` (npm run bench:h2 installs it when it is missing)")
}
if (WRK && !hasWrk()) throw new Error("wrk is not installed: `apt-get install -y wrk` (or --no-wrk)")

/** Requests in flight in every case: 16 HTTP/2 connections of 8 streams, or 128 HTTP/1.1 connections. */
const H2_CLIENTS = 16
const H2_STREAMS = 8
const IN_FLIGHT = H2_CLIENTS * H2_STREAMS
/** The target of the issue: h2's CPU per request / HTTP/1.1 over TLS's. */
const TARGET_RATIO = 1.2

type Mode = "h2" | "h1" | "wrk"
const MODES: ReadonlyArray<Mode> = WRK ? ["h2", "h1", "wrk"] : ["h2", "h1"]
const MODE_LABELS: Record<Mode, string> = {
  h2: `HTTP/2 over TLS, h2load -c${H2_CLIENTS} -m${H2_STREAMS}`,
  h1: `HTTP/1.1 over TLS, h2load --h1 -c${IN_FLIGHT}`,
  wrk: `HTTP/1.1 over TLS, wrk -c${IN_FLIGHT}`
}

const get = (key: string, title: string, path: "small" | "large"): Scenario => {
  const answer = ANSWERS.find((a) => a.path === path)!
  return { key, title, kind: "http", path, method: "GET", bodyBytes: 0, answerBytes: answer.answerBytes, connections: IN_FLIGHT }
}
const SCENARIOS: ReadonlyArray<Scenario> = [get("64 B", "64-byte GET", "small"), get("64 KiB", "64 KiB GET", "large")]

const WINDOWS = (ROUNDS + 1) * SCENARIOS.length * MODES.length
/** Whatever happens, the run ends (and every process it started with it) after this: twice its windows' time, and start-ups. */
const HARD_LIMIT_MS = 120_000 + WINDOWS * 2 * (WARMUP_S + WINDOW_S + 1) * 1000

// ---------------------------------------------------------------------------------------
// h2load: one run, the servers' CPU read at the edges of its main duration

interface H2loadSpec {
  readonly origin: string
  readonly paths: ReadonlyArray<string>
  readonly clients: number
  /** Streams per connection; undefined: HTTP/1.1 (`--h1`), one request at a time. */
  readonly streams: number | undefined
  readonly warmupS: number
  readonly seconds: number
}

interface H2loadResult extends LoadResult {
  /** Mean request time, ms (h2load's summary). */
  readonly mean: number
  /** ALPN's choice, as h2load prints it. */
  readonly protocol: string
}

const TIME_UNITS: Record<string, number> = { us: 1e-3, ms: 1, s: 1e3 }
/** `635us`, `5.80ms`, `1.20s` in ms. */
const h2loadTimeMs = (text: string): number => {
  const match = /^(\d+(?:\.\d+)?)(us|ms|s)$/.exec(text)
  if (match === null) throw new Error(`h2load: not a time: ${JSON.stringify(text)}`)
  return Number(match[1]) * TIME_UNITS[match[2]!]!
}

/** The figures of h2load's summary, the percentiles from its per-request log (`start µs, status, µs`). */
const parseH2load = (text: string, log: string, inFlight: number, seconds: number, label: string): H2loadResult => {
  const fail = (what: string): never => {
    throw new Error(`${label}: h2load's output has no ${what}:\n${text}`)
  }
  const one = (pattern: RegExp, what: string): RegExpExecArray => pattern.exec(text) ?? fail(what)
  const protocol = one(/^Application protocol: (\S+)\s*$/m, "Application protocol line")[1]!
  const perSecond = Number(one(/^finished in \S+, (\d+(?:\.\d+)?) req\/s/m, "'finished in' line")[1])
  const requests = one(/^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout\s*$/m, "requests line")
  const [done, succeeded, failed, errored, timedOut] = [3, 4, 5, 6, 7].map((i) => Number(requests[i]))
  const codes = one(/^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx\s*$/m, "status codes line")
  const [c3xx, c4xx, c5xx] = [2, 3, 4].map((i) => Number(codes[i]))
  const traffic = Number(one(/^traffic: \S+ \((\d+)\) total/m, "traffic line")[1])
  const times = one(/^time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+\S+%\s*$/m, "'time for request' row")
  // h2load counts a status >= 400 as failed: only the rest of "failed" is an error of its own.
  const non2xx = c3xx! + Math.max(failed!, c4xx! + c5xx!)
  const statuses: Record<string, number> = {}
  for (const [name, n] of [["3xx", c3xx!], ["4xx", c4xx!], ["5xx", c5xx!], ["errored", errored!], ["timeout", timedOut!]] as const) {
    if (n > 0) statuses[name] = n
  }

  // The log: one line per request of the window. A request in flight when the window opened
  // may be logged with status 0 (its headers came in the warm-up): not in the percentiles.
  const latencies: Array<number> = []
  let logged = 0
  for (const line of log.split("\n")) {
    if (line === "") continue
    logged++
    const [, status, micros] = line.split("\t")
    if (Number(status) >= 200 && Number(status) < 300) latencies.push(Number(micros) / 1000)
  }
  // The log and the summary count the same requests but for the ones in flight at the window's edges.
  if (Math.abs(logged - done!) > 2 * inFlight + 0.001 * done!) {
    throw new Error(`${label}: h2load's log has ${logged} requests, its summary ${done} done:\n${text}`)
  }
  const sorted = Float64Array.from(latencies).sort()
  const at = (q: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!)
  return {
    completed: succeeded! - c3xx!,
    seconds,
    perSecond,
    p50: at(0.5),
    p99: at(0.99),
    max: h2loadTimeMs(times[2]!),
    mean: h2loadTimeMs(times[3]!),
    non2xx,
    errors: errored!,
    timeouts: timedOut!,
    statuses,
    bytesEach: traffic / Math.max(done!, 1),
    protocol
  }
}

let logDir: string | undefined
const logFile = (): string => {
  if (logDir === undefined) {
    const dir = mkdtempSync(join(tmpdir(), "pinboard-h2load-"))
    logDir = dir
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }))
  }
  return join(logDir, "requests.tsv")
}

interface Measured {
  readonly result: LoadResult & { readonly mean?: number }
  readonly cpu: CpuShares
  /** The window on the monotonic clock, µs (as V8's profile's). */
  readonly window: { readonly start: number; readonly end: number }
}

const nowUs = () => Number(process.hrtime.bigint() / 1000n)

/** Runs h2load once on LOAD_CORE; throws unless it exits 0 with a summary, both window edges seen and the protocol asked for. */
const runH2load = async (label: string, spec: H2loadSpec, watched: Watched, alive: ReadonlyArray<Proc>): Promise<Measured> => {
  const log = logFile()
  // h2load writes over the file without truncating it: each run starts from none.
  rmSync(log, { force: true })
  const args = [
    "-t1",
    `-c${spec.clients}`,
    ...(spec.streams === undefined ? ["--h1"] : [`-m${spec.streams}`]),
    "-D",
    String(spec.seconds),
    ...(spec.warmupS > 0 ? [`--warm-up-time=${spec.warmupS}`] : []),
    `--log-file=${log}`,
    ...spec.paths.map((path) => `${spec.origin}${path}`)
  ]
  const proc = spawnPinned("h2load", LOAD_CORE, H2LOAD, args)
  let before: { servers: Reading; load: number; at: number } | undefined
  let after: typeof before
  proc.onLine((line) => {
    if (line.startsWith("Main benchmark duration is started")) before = { servers: reading(watched), load: cpuSeconds(proc.pid), at: nowUs() }
    else if (line.startsWith("Main benchmark duration is over")) after = { servers: reading(watched), load: cpuSeconds(proc.pid), at: nowUs() }
  })
  const closed = new Promise((resolve) => proc.child.once("close", resolve))
  const limit = setTimeout(() => void stop(proc), (spec.warmupS + spec.seconds + 30) * 1000)
  const { code, signal } = await proc.exited
  await closed
  clearTimeout(limit)
  checkAlive(alive)
  const text = proc.lines.join("\n")
  if (code !== 0) throw new Error(`h2load for ${label}: exit ${signal ?? code}; output:\n${text}`)
  if (before === undefined || after === undefined) throw new Error(`h2load for ${label}: no start or end of its main duration in its output:\n${text}`)
  const result = parseH2load(text, readFileSync(log, "utf8"), spec.clients * (spec.streams ?? 1), spec.seconds, label)
  const wanted = spec.streams === undefined ? "http/1.1" : "h2"
  if (result.protocol !== wanted) throw new Error(`h2load for ${label}: ALPN chose ${result.protocol}, not ${wanted}:\n${text}`)
  const seconds = (after.servers.at - before.servers.at) / 1000
  return { result, cpu: sharesOf(watched, before.servers, after.servers, after.load - before.load, [proc.pid], seconds), window: { start: before.at, end: after.at } }
}

// ---------------------------------------------------------------------------------------
// The rig

interface Rig {
  readonly redis: RedisServer
  readonly worker: Proc
  readonly pinboard: Proc
  /** `https://127.0.0.1:<data port>`. */
  readonly origin: string
  readonly ca: Buffer
}

/** Every path answers 200 with its whole body over HTTP/1.1 (fetch) and over HTTP/2 (ALPN h2), before anything is measured. */
const checkPaths = async (rig: Rig): Promise<void> => {
  const paths = SCENARIOS.flatMap((s) => placedPaths(s.path).map((path) => ({ path, bytes: s.answerBytes })))
  for (const { path, bytes } of paths) {
    const r = await fetch(`${rig.origin}${path}`)
    const body = await r.arrayBuffer()
    if (r.status !== 200 || body.byteLength !== bytes) throw new Error(`HTTP/1.1 GET ${path}: ${r.status} with ${body.byteLength} bytes (expected 200, ${bytes})`)
  }
  const session = http2.connect(rig.origin, { ca: rig.ca })
  try {
    await new Promise<void>((resolve, reject) => {
      session.once("connect", () => resolve())
      session.once("error", reject)
    })
    if (session.alpnProtocol !== "h2") throw new Error(`ALPN chose ${String(session.alpnProtocol)}, not h2`)
    for (const { path, bytes } of paths) {
      const { status, length } = await new Promise<{ status: number; length: number }>((resolve, reject) => {
        const stream = session.request({ ":path": path })
        let status = 0
        let length = 0
        stream.on("response", (headers) => {
          status = Number(headers[":status"])
        })
        stream.on("data", (chunk: Buffer) => {
          length += chunk.length
        })
        stream.on("end", () => resolve({ status, length }))
        stream.on("error", reject)
      })
      if (status !== 200 || length !== bytes) throw new Error(`HTTP/2 GET ${path}: ${status} with ${length} bytes (expected 200, ${bytes})`)
    }
  } finally {
    session.close()
  }
}

// ---------------------------------------------------------------------------------------
// Measuring

interface Cell extends Measured {
  readonly scenario: Scenario
  readonly mode: Mode
  readonly round: number
}

/**
 * h2load's byte count holds the bytes read in the window, its "done" the responses ended in
 * it: the responses in flight at either edge make its bytes per response approximate (about
 * 1% at 64 KiB, either way). A body shorter than its content-length is an error of h2load's
 * own in both protocols (and every body was checked whole before), so only a byte count well
 * short of the body's is broken here. wrk's cells: bench/proxyReport.ts's rule.
 */
const H2LOAD_BYTES_SLACK = 0.98
const brokenOf = (cell: Cell): boolean =>
  cell.mode === "wrk"
    ? brokenCell(cell)
    : cell.result.errors + cell.result.timeouts + cell.result.non2xx > 0 || cell.result.bytesEach < H2LOAD_BYTES_SLACK * cell.scenario.answerBytes

const measure = async (rig: Rig, scenario: Scenario, mode: Mode, warmupS: number, seconds: number): Promise<Measured> => {
  const label = `${MODE_LABELS[mode]}, ${scenario.title}`
  const watched: Watched = { proxy: [rig.pinboard.pid], worker: rig.worker.pid, redis: [rig.redis.pid] }
  const alive = [rig.worker, rig.pinboard]
  const paths = placedPaths(scenario.path)
  if (mode === "wrk") {
    const start = nowUs()
    const { result, cpu } = await measureHttp(label, { origins: [rig.origin], paths, method: "GET", bodyBytes: 0, connections: IN_FLIGHT, warmupS, seconds }, watched, alive)
    // The warm-up's run is not in the window: with --cpu-prof, the samples of the last `seconds` only.
    const end = nowUs()
    return { result, cpu, window: { start: Math.max(start, end - cpu.seconds * 1e6), end } }
  }
  const h2 = mode === "h2"
  return runH2load(label, { origin: rig.origin, paths, clients: h2 ? H2_CLIENTS : IN_FLIGHT, streams: h2 ? H2_STREAMS : undefined, warmupS, seconds }, watched, alive)
}

const run = async (rig: Rig): Promise<ReadonlyArray<Cell>> => {
  // Untimed first pass over every case, so that every process has its code warm.
  for (const scenario of SCENARIOS) for (const mode of MODES) await measure(rig, scenario, mode, 1, 1)
  const cells: Array<Cell> = []
  for (let round = 1; round <= ROUNDS; round++) {
    for (const scenario of SCENARIOS) {
      for (const mode of round % 2 === 1 ? MODES : [...MODES].reverse()) {
        const measured = await measure(rig, scenario, mode, WARMUP_S, WINDOW_S)
        cells.push({ ...measured, scenario, mode, round })
        const { result, cpu } = measured
        console.log(
          `round ${round}  ${scenario.key.padEnd(6)}  ${mode.padEnd(3)}  ${fmt(result.perSecond).padStart(7)}/s  p50 ${ms(result.p50)}  p99 ${ms(result.p99)}` +
            `  max ${ms(result.max)} ms  errors ${broken(result)}  ${cpuText(cpu)}  Pinboard ${us(cpuPerRequestUs(measured, "proxy"))} µs/req`
        )
      }
    }
  }
  return cells
}

// ---------------------------------------------------------------------------------------
// Report

const report = (cells: ReadonlyArray<Cell>): boolean => {
  const of = (scenario: Scenario, mode: Mode) => cells.filter((c) => c.scenario === scenario && c.mode === mode)
  const medianOf = (scenario: Scenario, mode: Mode, figure: (cell: Cell) => number) => median(of(scenario, mode).map(figure))
  const cpuUs = (scenario: Scenario, mode: Mode, role: "proxy" | "worker" | "redis" = "proxy") => medianOf(scenario, mode, (c) => cpuPerRequestUs(c, role))
  const serversUs = (c: Cell) => cpuPerRequestUs(c, "proxy") + cpuPerRequestUs(c, "worker") + cpuPerRequestUs(c, "redis")
  const rate = (scenario: Scenario, mode: Mode) => medianOf(scenario, mode, (c) => c.result.perSecond)

  console.log("")
  console.log(`Medians over ${ROUNDS} round${ROUNDS === 1 ? "" : "s"} (max: the largest of any round); ${IN_FLIGHT} requests in flight in every case.`)
  console.log(`h2load: req/s and mean/max from its summary, p50/p99 from its per-request log; wrk: its own figures (no mean).`)
  console.log(`errors = errors + timeouts / non-2xx, summed over the rounds; bytes each = bytes received per response, headers`)
  console.log(`included. CPU µs/req = each process's CPU time in the window (/proc) / the requests completed. load gen = cores`)
  console.log(`used by h2load or wrk (core 0); other = cores used by every other process (/proc/stat's busy time less all of`)
  console.log(`those and this process). "rounds" lists each round's rate and its "other"; ! marks a noisy round (other >`)
  console.log(`${NOISY} of a core): repeat the run if the medians lean on one.`)
  for (const scenario of SCENARIOS) {
    console.log("")
    console.log(`${scenario.title} (requests/s)`)
    console.log(table(
      ["case", "req/s", "p50 ms", "p99 ms", "mean ms", "max ms", "errors", "bytes each", "CPU µs/req: Pinboard", "worker", "redis", "load gen", "other", "rounds (other)"],
      MODES.map((mode) => {
        const all = of(scenario, mode)
        const errors = all.reduce((n, c) => n + c.result.errors + c.result.timeouts, 0)
        const non2xx = all.reduce((n, c) => n + c.result.non2xx, 0)
        return [
          MODE_LABELS[mode],
          fmt(rate(scenario, mode)),
          ms(medianOf(scenario, mode, (c) => c.result.p50)),
          ms(medianOf(scenario, mode, (c) => c.result.p99)),
          mode === "wrk" ? "-" : ms(medianOf(scenario, mode, (c) => c.result.mean ?? NaN)),
          ms(Math.max(...all.map((c) => c.result.max))),
          `${errors}/${non2xx}`,
          fmt(medianOf(scenario, mode, (c) => c.result.bytesEach)),
          us(cpuUs(scenario, mode)),
          us(cpuUs(scenario, mode, "worker")),
          us(cpuUs(scenario, mode, "redis")),
          share(medianOf(scenario, mode, (c) => c.cpu.load)),
          share(medianOf(scenario, mode, (c) => c.cpu.others)),
          all.map((c) => `${fmt(c.result.perSecond)} (${c.cpu.others.toFixed(2)}${c.cpu.others > NOISY ? "!" : ""})`).join(" ")
        ]
      })
    ))
  }

  const ratio = (figure: (s: Scenario, m: Mode) => number, a: Mode, b: Mode) => (s: Scenario) => (figure(s, a) / figure(s, b)).toFixed(2)
  const servers = (s: Scenario, m: Mode) => medianOf(s, m, serversUs)
  const columns: Array<[string, (s: Scenario) => string]> = [
    ["Pinboard CPU/req h2 / h1", ratio(cpuUs, "h2", "h1")],
    ...(WRK ? ([["h2 / wrk", ratio(cpuUs, "h2", "wrk")], ["h1 / wrk", ratio(cpuUs, "h1", "wrk")]] as Array<[string, (s: Scenario) => string]>) : []),
    ["all servers' CPU/req h2 / h1", ratio(servers, "h2", "h1")],
    ["req/s h2 / h1", ratio(rate, "h2", "h1")],
    ["p99 h2 / h1", ratio((s, m) => medianOf(s, m, (c) => c.result.p99), "h2", "h1")]
  ]
  console.log("")
  console.log(`Ratios (medians over the rounds; h1 = HTTP/1.1 over TLS by h2load, wrk = the same by wrk; all servers = Pinboard +`)
  console.log(`worker + redis-server)`)
  console.log(table(["", ...columns.map(([name]) => name)], SCENARIOS.map((s) => [s.key, ...columns.map(([, cell]) => cell(s))])))

  console.log("")
  console.log(`Target (medians over ${ROUNDS} round${ROUNDS === 1 ? "" : "s"}${ROUNDS < 3 ? "; fewer than 3: indicative only" : ""}; printed, never asserted)`)
  for (const s of SCENARIOS) {
    const r = cpuUs(s, "h2") / cpuUs(s, "h1")
    console.log(
      `  Pinboard's CPU per request, h2 / HTTP/1.1 over TLS <= ${TARGET_RATIO}, ${s.title.padEnd(11)}: ${r.toFixed(2)} ${r <= TARGET_RATIO ? "meets" : "MISSES"}` +
        ` (${us(cpuUs(s, "h2"))} µs against ${us(cpuUs(s, "h1"))} µs)`
    )
  }

  const noisy = cells.filter((c) => c.cpu.others > NOISY)
  if (noisy.length > 0) {
    console.log("")
    console.log(`Noisy windows (other processes above ${NOISY} of a core): ${noisy.length} of ${cells.length}`)
    for (const c of noisy) console.log(`  round ${c.round}, ${c.scenario.key}, ${MODE_LABELS[c.mode]}: other ${c.cpu.others.toFixed(2)} (busiest: ${busiestText(c.cpu)})`)
  }
  const faulty = cells.filter(brokenOf)
  for (const c of faulty) {
    console.log(
      `BROKEN round ${c.round}, ${c.scenario.title}, ${MODE_LABELS[c.mode]}: ${c.result.errors} errors, ${c.result.timeouts} timeouts, ` +
        `${c.result.non2xx} non-2xx ${JSON.stringify(c.result.statuses)}, ${fmt(c.result.bytesEach)} bytes per response (the answer has ${fmt(c.scenario.answerBytes)})`
    )
  }
  return faulty.length === 0
}

// ---------------------------------------------------------------------------------------
// --cpu-prof: Pinboard's self time per request in each case's windows, by layer and by function

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
}
interface CpuProfile {
  /** µs on the monotonic clock. */
  readonly startTime: number
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

/** Where a frame's code lives, split the way HTTP/2 and HTTP/1.1 differ. */
const LAYERS: ReadonlyArray<[string, (frame: ProfileNode["callFrame"]) => boolean]> = [
  ["GC", (f) => f.functionName === "(garbage collector)"],
  ["native: (program), bindings (writev...)", (f) => f.functionName === "(program)" || (f.url === "" && f.functionName !== "(idle)" && f.functionName !== "(root)")],
  ["node:http2 (core, compat)", (f) => f.url.startsWith("node:internal/http2/") || f.url === "node:http2"],
  ["node:http (HTTP/1.1 parser, server, agent)", (f) => /^node:(_http_|http$|https$|internal\/http)/.test(f.url)],
  ["TLS (JS side)", (f) => /^node:(_tls_|tls$|internal\/tls)/.test(f.url)],
  ["net, stream_base", (f) => /^node:(net$|internal\/(stream_base_commons|net|js_stream_socket))/.test(f.url)],
  ["streams", (f) => /^node:(stream|internal\/streams)/.test(f.url)],
  ["undici (forward to the worker)", (f) => f.url.includes("/node_modules/undici/") || f.url.startsWith("node:internal/deps/undici")],
  ["ioredis", (f) => /\/node_modules\/(ioredis|redis-parser|denque|cluster-key-slot|standard-as-callback|@ioredis)\//.test(f.url)],
  ["Effect runtime", (f) => f.url.includes("/node_modules/effect/") || f.url.includes("/node_modules/@effect/")],
  ["Pinboard (dist/)", (f) => f.url.includes("/dist/") && !f.url.includes("/node_modules/")],
  ["other node internals and deps", (f) => f.functionName !== "(idle)" && f.functionName !== "(root)"]
]

const layerOf = (frame: ProfileNode["callFrame"]): string | undefined => LAYERS.find(([, test]) => test(frame))?.[0]
const frameName = ({ functionName, url, lineNumber }: ProfileNode["callFrame"]): string => {
  const where = url.includes("/node_modules/") ? url.replace(/^.*\/node_modules\//, "") : url.replace(/^.*\/dist\//, "dist/")
  return `${functionName || "(anonymous)"} ${where}${where === "" ? "" : `:${lineNumber + 1}`}`
}

/** Self µs per request by layer and by function, over the windows of each case. */
const profileReport = (profile: CpuProfile, cells: ReadonlyArray<Cell>): void => {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node.callFrame] as const))
  /** Self µs by node id in the windows of `cells`, and their requests. */
  const selfIn = (chosen: ReadonlyArray<Cell>) => {
    const self = new Map<number, number>()
    let at = profile.startTime
    profile.samples.forEach((id, i) => {
      const delta = profile.timeDeltas[i] ?? 0
      at += delta
      if (chosen.some((c) => at >= c.window.start && at <= c.window.end)) self.set(id, (self.get(id) ?? 0) + delta)
    })
    return { self, requests: chosen.reduce((n, c) => n + c.result.completed, 0) }
  }
  const perRequest = (chosen: ReadonlyArray<Cell>, key: (frame: ProfileNode["callFrame"]) => string | undefined) => {
    const { self, requests } = selfIn(chosen)
    const byKey = new Map<string, number>()
    for (const [id, micros] of self) {
      const k = key(nodes.get(id)!)
      if (k !== undefined) byKey.set(k, (byKey.get(k) ?? 0) + micros / Math.max(requests, 1))
    }
    return byKey
  }
  const profiled: ReadonlyArray<Mode> = ["h2", "h1"]
  console.log("")
  console.log(`--cpu-prof: Pinboard's self time in the windows of each case (every round), µs per request; the sampling`)
  console.log(`profiler's own cost is in these figures and in the tables above. h1 = HTTP/1.1 over TLS by h2load.`)
  for (const scenario of SCENARIOS) {
    const chosen = (mode: Mode) => cells.filter((c) => c.scenario === scenario && c.mode === mode)
    const layers = profiled.map((mode) => perRequest(chosen(mode), layerOf))
    const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0)
    console.log("")
    console.log(`${scenario.title}: by layer`)
    console.log(table(
      ["layer", "h2 µs/req", "h1 µs/req", "h2 - h1"],
      [
        ...LAYERS.map(([name]) => {
          const [h2, h1] = layers.map((m) => m.get(name) ?? 0) as [number, number]
          return [name, h2.toFixed(1), h1.toFixed(1), (h2 - h1).toFixed(1)]
        }),
        ["busy, all layers", ...layers.map((m) => total(m).toFixed(1)), (total(layers[0]!) - total(layers[1]!)).toFixed(1)]
      ]
    ))
    const functions = profiled.map((mode) => perRequest(chosen(mode), (frame) => (frame.functionName.startsWith("(") ? undefined : frameName(frame))))
    const names = new Set([...functions[0]!.keys(), ...functions[1]!.keys()])
    const rows = [...names]
      .map((name) => [name, functions[0]!.get(name) ?? 0, functions[1]!.get(name) ?? 0] as const)
      .sort((a, b) => Math.abs(b[1] - b[2]) - Math.abs(a[1] - a[2]))
      .slice(0, 20)
    console.log("")
    console.log(`${scenario.title}: the functions whose self time differs most, µs per request`)
    console.log(table(["function  where", "h2", "h1", "h2 - h1"], rows.map(([name, h2, h1]) => [name, h2.toFixed(1), h1.toFixed(1), (h2 - h1).toFixed(1)])))
  }
}

// ---------------------------------------------------------------------------------------
// Entry: every process is stopped by its pid on every way out.

let redis: RedisServer | undefined
let ca: TestCa | undefined
const profileDir = CPU_PROF ? mkdtempSync(join(tmpdir(), "pinboard-h2-profile-")) : undefined
const stopEverythingSync = () => {
  stopAllSync()
  redis?.stopSync()
  ca?.remove()
}
const guard = stopOnEveryExit(HARD_LIMIT_MS, stopEverythingSync, () => Promise.all([stopAll(), redis?.stop()]))

const started = performance.now()
let registration: Registration | undefined
try {
  const cpus = availableParallelism()
  // This process only heartbeats and waits: it stays off the servers' core.
  pinPid(process.pid, LOAD_CORE)
  ca = makeTestCa(["pinboard"])
  const caPem = readFileSync(ca.file("ca.pem"))
  // This process's fetch (the placements, the checks) trusts the test CA.
  setGlobalDispatcher(new Agent({ connect: { ca: caPem } }))
  redis = await startRedisServer()
  pinPid(redis.pid, SERVER_CORE)
  const { proc: worker, origin: workerOrigin } = await startWorker()
  const registryPort = await freePort()
  const pinboard = await startPinboard(
    "pinboard",
    { PINBOARD_REDIS_URL: redis.url, PINBOARD_TLS_CERT: ca.file("pinboard.pem"), PINBOARD_TLS_KEY: ca.file("pinboard.key"), PINBOARD_REGISTRY_PORT: String(registryPort) },
    profileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${profileDir}`]
  )
  const registryOrigin = `http://127.0.0.1:${registryPort}`
  await waitHealthy({ proc: pinboard.proc, origin: registryOrigin })
  const rig: Rig = { redis, worker, pinboard: pinboard.proc, origin: pinboard.origin.replace(/^http:/, "https:"), ca: caPem }
  const h2loadVersion = spawnSync(H2LOAD, ["--version"], { encoding: "utf8" }).stdout.trim()
  console.log(
    `${cpus} CPUs; ${hasTaskset ? `load generator (${h2loadVersion}, -t1${WRK ? "; wrk -t1" : ""}) on core ${LOAD_CORE}; redis-server, worker, Pinboard on core ${SERVER_CORE}` : "taskset not found: nothing pinned, the ratios are not comparable"}`
  )
  console.log(
    `redis-server pid ${redis.pid} :${redis.port}; worker pid ${worker.pid}; Pinboard pid ${pinboard.proc.pid} (lease ${LEASE_MS} ms, TLS on ${rig.origin}, registry API on ${registryOrigin})` +
      (CPU_PROF ? "; Pinboard under --cpu-prof" : "")
  )
  registration = await register(registryOrigin, workerOrigin)
  console.log(await waitForPlacements(rig.origin))
  await checkPaths(rig)
  console.log(
    `every path answers 200 with its whole body over HTTP/1.1 and HTTP/2 (ALPN h2); ${ROUNDS} rounds, windows of ${WINDOW_S} s after ${WARMUP_S} s of warm-up;` +
      ` requests rotate over ${IDS.length} placed ids`
  )
  console.log("")
  const cells = await run(rig)
  const healthy = report(cells)
  console.log("")
  const { stats } = registration
  console.log(`heartbeats: ${stats.beats} ok, ${stats.failed} failed, ${stats.reregistered} re-registrations, slowest ${stats.slowestMs.toFixed(1)} ms`)
  const kib = peakRssKiB(pinboard.proc.pid)
  if (kib !== undefined) console.log(`peak RSS: Pinboard ${Math.round(kib / 1024)} MB`)
  if (profileDir !== undefined) {
    registration.stop()
    // SIGTERM: Pinboard drains and exits, and V8 writes the profile on the way out.
    killPid(pinboard.proc.pid, "SIGTERM")
    await pinboard.proc.exited
    const file = readdirSync(profileDir).find((name) => name.endsWith(".cpuprofile"))
    if (file === undefined) throw new Error(`no profile written in ${profileDir}; Pinboard printed:\n${pinboard.proc.lines.join("\n")}`)
    profileReport(JSON.parse(readFileSync(join(profileDir, file), "utf8")) as CpuProfile, cells)
    if (KEEP) console.log(`\nprofile kept: ${join(profileDir, file)}`)
  }
  const lines = pinboard.proc.lines.filter((line) => !/listening on/.test(line))
  if (lines.length > 0) {
    console.log(`Pinboard printed ${lines.length} lines besides its listening lines (last 10 of them):`)
    for (const line of lines.slice(-10)) console.log(`  ${line}`)
  }
  console.log(`total ${((performance.now() - started) / 1000).toFixed(1)} s`)
  if (!healthy) process.exitCode = 1
} catch (error) {
  if (guard.stopping()) console.error("bench: stopped")
  else console.error("bench failed:", error)
  process.exitCode = 1
} finally {
  registration?.stop()
  await stopAll()
  await redis?.stop()
  ca?.remove()
  if (profileDir !== undefined && !KEEP) rmSync(profileDir, { recursive: true, force: true })
  guard.disarm()
}
