// The HTTP load generator of bench/proxy.ts: wrk (Debian's package `wrk`, 4.1), one process
// per run, pinned by the caller's core. This module writes its Lua script to a temp file,
// runs it, and reads its output.
//
//   wrk -t<origins> -c<connections> -d<seconds>s --latency --timeout 10s -s <script> <origin><first path>
//
// One thread per origin (one origin: `-t1`); with several origins the script's setup() points
// each thread at its own, and wrk gives every thread connections / threads of them (rounded
// down). The script rotates the request path over the given paths (one request string per
// path, built once in init(); request() returns the next), with the method and a body of the
// given size for a POST. It defines no response(), which would make wrk copy every header and
// body into Lua. Its done() prints one line, `wrk-done {...}`: wrk's own exact counts and
// percentiles, and the CPU time of the wrk process (os.clock(), every thread's, the threads
// are joined by then), which is the load generator's CPU in the caller's figures.
//
// The figures are parsed from wrk's text, as a user reads them:
//   Requests/sec: 5123.45                      -> perSecond
//   Latency Distribution / 50% 1.23ms, 99% ... -> p50, p99 (the `--latency` table)
//   Latency  avg  stdev  max  +/-              -> max (the "Thread Stats" Latency row)
//   N requests in 8.00s, 1.23GB read           -> completed, seconds (the bytes per response from
//                                                 done()'s exact count: the text has 3 digits)
//   Socket errors: connect a, read b, write c, timeout d    (printed only when one is > 0)
//   Non-2xx or 3xx responses: n                (printed only when > 0; wrk counts status > 399)
// and checked against the done() line (the counts equal, the percentiles within the text's
// rounding): a parse that disagrees stops the run rather than reporting a wrong figure.
// wrk's latency figures are its own: its histogram after its correction for coordinated
// omission (wrk 4 adds, for every sample above twice the mean interval of a connection, the
// samples a steady sender would have seen), which is what a user of wrk reads.
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { LoadResult } from "./load.js"
import { spawnPinned, stop } from "./processes.js"

export const WRK = "wrk"
/** wrk's socket and request timeout, as the Node client's. */
const TIMEOUT_S = 10

export const hasWrk = (): boolean => spawnSync(WRK, ["-v"], { stdio: "ignore" }).error === undefined

export interface WrkSpec {
  /** `http://127.0.0.1:port` each; one wrk thread per origin, the connections split over them. */
  readonly origins: ReadonlyArray<string>
  /** Rotated over, one request after the other. */
  readonly paths: ReadonlyArray<string>
  readonly method: "GET" | "POST"
  /** The size of every request's body (POST), 0 for none. */
  readonly bodyBytes: number
  readonly connections: number
  /** Whole seconds (wrk's `-d` takes no fractions). */
  readonly seconds: number
}

export interface WrkResult extends LoadResult {
  /** The socket errors by kind, as wrk prints them. */
  readonly socket: { readonly connect: number; readonly read: number; readonly write: number; readonly timeout: number }
  /** Connections wrk opened: connections / threads, times threads. */
  readonly connectionsOpened: number
  /** CPU time the wrk process used, in seconds, from its done(). */
  readonly cpuSeconds: number
  /** wrk's whole output. */
  readonly text: string
}

// ---------------------------------------------------------------------------------------
// The Lua script

const luaString = (text: string): string => JSON.stringify(text)

export const wrkScript = (spec: WrkSpec): string => {
  const addresses = spec.origins.map((origin) => new URL(origin))
  return `-- written by bench/wrk.ts
local paths = { ${spec.paths.map(luaString).join(", ")} }
local method = ${luaString(spec.method)}
local body = ${spec.bodyBytes > 0 ? `string.rep("p", ${spec.bodyBytes})` : "nil"}
local hosts = { ${addresses.map((url) => luaString(url.hostname)).join(", ")} }
local ports = { ${addresses.map((url) => luaString(url.port)).join(", ")} }
local threads = 0
local built = {}
local at = 0

${spec.origins.length > 1 ? "" : "-- "}function setup(thread) threads = threads + 1; thread.addr = wrk.lookup(hosts[threads], ports[threads])[1] end

function init(args)
  for k, path in ipairs(paths) do
    local headers = { ["Host"] = wrk.headers["Host"] }
    if body then headers["Content-Type"] = "application/octet-stream" end
    built[k] = wrk.format(method, path, headers, body)
  end
end

function request()
  at = at % #built + 1
  return built[at]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('wrk-done {"durationUs":%d,"requests":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"status":%d,"p50Us":%d,"p99Us":%d,"maxUs":%d,"cpuSeconds":%.4f}\\n',
    summary.duration, summary.requests, summary.bytes, e.connect, e.read, e.write, e.timeout, e.status,
    latency:percentile(50.0), latency:percentile(99.0), latency.max, os.clock()))
end
`
}

let scriptDir: string | undefined
/** The script's path in this process's temp directory (one file per distinct script, removed on exit). */
const scriptFile = (text: string): string => {
  if (scriptDir === undefined) {
    const dir = mkdtempSync(join(tmpdir(), "pinboard-wrk-"))
    scriptDir = dir
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }))
  }
  const file = join(scriptDir, `${createHash("sha1").update(text).digest("hex").slice(0, 12)}.lua`)
  writeFileSync(file, text)
  return file
}

// ---------------------------------------------------------------------------------------
// Running it

/** Runs wrk once on `core` (taskset, when present); throws unless it exits 0 with a complete report. */
export const runWrk = async (label: string, spec: WrkSpec, core: number | undefined): Promise<WrkResult> => {
  if (!Number.isInteger(spec.seconds) || spec.seconds < 1) throw new Error(`wrk runs whole seconds, not ${spec.seconds}`)
  const threads = spec.origins.length
  const args = [
    `-t${threads}`,
    `-c${spec.connections}`,
    `-d${spec.seconds}s`,
    "--latency",
    "--timeout",
    `${TIMEOUT_S}s`,
    "-s",
    scriptFile(wrkScript(spec)),
    `${spec.origins[0]}${spec.paths[0]}`
  ]
  const proc = spawnPinned("wrk", core, WRK, args)
  // After "close" every line of its output has been read (the exit may come before them).
  const closed = new Promise((resolve) => proc.child.once("close", resolve))
  const limit = setTimeout(() => void stop(proc), (spec.seconds + TIMEOUT_S + 20) * 1000)
  const { code, signal } = await proc.exited
  await closed
  clearTimeout(limit)
  const text = proc.lines.join("\n")
  if (code !== 0) throw new Error(`wrk for ${label}: exit ${signal ?? code}; output:\n${text}`)
  return parseWrk(text, Math.floor(spec.connections / threads) * threads, label)
}

// ---------------------------------------------------------------------------------------
// Parsing its output

const TIME_UNITS: Record<string, number> = { us: 1e-3, ms: 1, s: 1e3, m: 60e3, h: 3600e3 }
const BINARY_UNITS: Record<string, number> = { "": 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4, P: 1024 ** 5 }

/** `635.91us`, `5.80ms`, `1.20s`, `1.50m` in ms. */
export const wrkTimeMs = (text: string): number => {
  const match = /^(\d+(?:\.\d+)?)(us|ms|s|m|h)$/.exec(text)
  if (match === null) throw new Error(`wrk: not a time: ${JSON.stringify(text)}`)
  return Number(match[1]) * TIME_UNITS[match[2]!]!
}

/** `17.73GB`, `512.00KB`, `96B` in bytes. */
const wrkBytes = (text: string): number => {
  const match = /^(\d+(?:\.\d+)?)([KMGTP]?)B$/.exec(text)
  if (match === null) throw new Error(`wrk: not a size: ${JSON.stringify(text)}`)
  return Number(match[1]) * BINARY_UNITS[match[2]!]!
}

interface Done {
  readonly durationUs: number
  readonly requests: number
  readonly bytes: number
  readonly connect: number
  readonly read: number
  readonly write: number
  readonly timeout: number
  readonly status: number
  readonly p50Us: number
  readonly p99Us: number
  readonly maxUs: number
  readonly cpuSeconds: number
}

/** The figures of one wrk report (with `--latency` and this module's done() line). */
export const parseWrk = (text: string, connectionsOpened: number, label = "wrk"): WrkResult => {
  const fail = (what: string): never => {
    throw new Error(`${label}: wrk's output has no ${what}:\n${text}`)
  }
  const one = (pattern: RegExp, what: string): RegExpExecArray => pattern.exec(text) ?? fail(what)
  const perSecond = Number(one(/^Requests\/sec:\s+(\d+(?:\.\d+)?)\s*$/m, "Requests/sec line")[1])
  const stats = one(/^\s+Latency\s+(\S+)\s+(\S+)\s+(\S+)\s+\S+%\s*$/m, "Latency row of Thread Stats")
  const distribution = one(/^\s+Latency Distribution\s*$/m, "Latency Distribution (--latency)")
  const after = text.slice(distribution.index)
  const percentile = (p: number) => wrkTimeMs((new RegExp(`^\\s+${p}%\\s+(\\S+)\\s*$`, "m").exec(after) ?? fail(`${p}% line`))[1]!)
  const totals = one(/^\s+(\d+) requests in (\S+), (\S+) read\s*$/m, "'requests in' line")
  const socketMatch = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text)
  const socket = {
    connect: Number(socketMatch?.[1] ?? 0),
    read: Number(socketMatch?.[2] ?? 0),
    write: Number(socketMatch?.[3] ?? 0),
    timeout: Number(socketMatch?.[4] ?? 0)
  }
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(text)?.[1] ?? 0)
  const requests = Number(totals[1])
  const seconds = wrkTimeMs(totals[2]!) / 1000
  const bytes = wrkBytes(totals[3]!)
  const result = {
    completed: requests - non2xx,
    seconds,
    perSecond,
    p50: percentile(50),
    p99: percentile(99),
    max: wrkTimeMs(stats[3]!),
    non2xx,
    errors: socket.connect + socket.read + socket.write,
    timeouts: socket.timeout,
    statuses: {
      ...(non2xx > 0 ? { "status > 399": non2xx } : {}),
      ...Object.fromEntries(Object.entries(socket).filter(([, n]) => n > 0).map(([kind, n]) => [`socket ${kind}`, n]))
    },
    bytesEach: bytes / Math.max(requests, 1),
    socket,
    connectionsOpened
  }

  // The done() line: wrk's exact figures, against which the parse is checked.
  const doneLine = one(/^wrk-done (\{.*\})\s*$/m, "wrk-done line (the script's done())")
  const done = JSON.parse(doneLine[1]!) as Done
  const near = (parsed: number, exact: number, relative: number) => Math.abs(parsed - exact) <= Math.max(relative * Math.abs(exact), 0.011)
  const checks: Array<[string, boolean]> = [
    ["requests", done.requests === requests],
    ["non-2xx", done.status === non2xx],
    ["socket errors", done.connect === socket.connect && done.read === socket.read && done.write === socket.write && done.timeout === socket.timeout],
    ["Requests/sec", near(perSecond, done.requests / (done.durationUs / 1e6), 0.001)],
    ["p50", near(result.p50, done.p50Us / 1000, 0.01)],
    ["p99", near(result.p99, done.p99Us / 1000, 0.01)],
    ["max", near(result.max, done.maxUs / 1000, 0.01)],
    ["bytes", near(bytes, done.bytes, 0.015)]
  ]
  const wrong = checks.filter(([, ok]) => !ok).map(([name]) => name)
  if (wrong.length > 0) throw new Error(`${label}: the figures parsed from wrk's text differ from its done() line (${wrong.join(", ")}):\n${text}`)
  // The text's byte count has 3 or 4 significant digits: the bytes per response come from the exact one.
  return { ...result, bytesEach: done.bytes / Math.max(requests, 1), cpuSeconds: done.cpuSeconds, text }
}
