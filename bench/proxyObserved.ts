// The observed Pinboards of bench/proxy.ts (`--observability`): started beside the plain one
// on the same redis-server, one with metrics on, one with metrics and the access log (its
// lines counted as this process reads them, none collected); then what their metrics and
// access log cost on the hot path, as ratios against the plain Pinboard measured in the same
// rounds, and a sanity line for each from one scrape of its `/metrics` after the measurements.
import { freePort } from "../test/support/Ports.js"
import type { RedisServer } from "../test/support/RedisServer.js"
import { cpuPerRequestUs, fmt, table, type Cell, type Scenario } from "./proxyReport.js"
import { OBSERVED, startPinboard, TARGET_LABELS, type ObservedName, type PinboardProc, type TargetName } from "./proxyTargets.js"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export interface ObservedPinboard extends PinboardProc {
  readonly target: ObservedName
  /** `http://host:port` of its metrics listener (`GET /metrics`). */
  readonly metricsOrigin: string
  /** Access lines read from its stdout so far (0 without the access log). */
  readonly accessLines: () => number
  /** The same lines by their `status` field. */
  readonly accessStatuses: ReadonlyMap<string, number>
  /** Its last few lines that are not access lines (start-up, warnings, errors). */
  readonly otherLines: ReadonlyArray<string>
}

const KEPT_OTHER_LINES = 5

/** Starts a Pinboard with metrics on a free port, and with the access log for "pinboard-logged"; does not wait for it. */
const startObserved = async (target: ObservedName, redis: RedisServer): Promise<ObservedPinboard> => {
  const metricsPort = await freePort()
  const started = await startPinboard(target, {
    PINBOARD_REDIS_URL: redis.url,
    PINBOARD_METRICS_PORT: String(metricsPort),
    ...(target === "pinboard-logged" ? { PINBOARD_ACCESS_LOG: "1" } : {})
  })
  // At a few thousand lines a second: counted here, not collected (Proc keeps only its last 200).
  let accessLines = 0
  const accessStatuses = new Map<string, number>()
  const otherLines: Array<string> = []
  started.proc.onLine((line) => {
    if (!line.includes(`"message":"access"`)) {
      if (otherLines.push(line) > KEPT_OTHER_LINES) otherLines.shift()
      return
    }
    accessLines++
    // The first `"status":` is the field: inside a JSON string its quotes would be escaped.
    const at = line.indexOf(`"status":`)
    const status = at === -1 ? "?" : line.slice(at + 9, at + 12)
    accessStatuses.set(status, (accessStatuses.get(status) ?? 0) + 1)
  })
  return {
    ...started,
    target,
    metricsOrigin: `http://127.0.0.1:${metricsPort}`,
    accessLines: () => accessLines,
    accessStatuses,
    otherLines
  }
}

/** Both observed Pinboards, in OBSERVED's order; startServers waits for them to be healthy. */
export const startObservedPinboards = async (redis: RedisServer): Promise<ReadonlyArray<ObservedPinboard>> => {
  const started: Array<ObservedPinboard> = []
  for (const target of OBSERVED) started.push(await startObserved(target, redis))
  return started
}

// ---------------------------------------------------------------------------------------
// Report

/** Throughput down to this share of the plain Pinboard's, or p99 up to its inverse, reads as a real cost. */
const NOTICEABLE = 0.95
/** How long the access lines of the last window may take to reach this process after the scrape. */
const DRAIN_MS = 2000

/** Prints the ratios and the sanity lines; true when every observed Pinboard counted what it served. */
export const observabilityReport = async (
  observed: ReadonlyArray<ObservedPinboard>,
  cells: ReadonlyArray<Cell>,
  scenarios: ReadonlyArray<Scenario>
): Promise<boolean> => {
  const http = scenarios.filter((scenario) => scenario.kind === "http")
  const of = (scenario: Scenario, target: TargetName) => cells.filter((c) => c.scenario === scenario && c.target === target)
  const best = (scenario: Scenario, target: TargetName) =>
    of(scenario, target).reduce((a, b) => (b.result.perSecond > a.result.perSecond ? b : a))
  const rateRatio = (scenario: Scenario, on: ObservedName) =>
    best(scenario, on).result.perSecond / best(scenario, "pinboard").result.perSecond
  const p99Ratio = (scenario: Scenario, on: ObservedName) => best(scenario, on).result.p99 / best(scenario, "pinboard").result.p99
  /** Pinboard's own CPU time per request in the best round: the cost that throughput on a shared core blurs. */
  const cpuPerRequest = (scenario: Scenario, target: TargetName) => {
    const cell = best(scenario, target)
    return cell.cpu.proxy === undefined ? "-" : cpuPerRequestUs(cell, "proxy").toFixed(0)
  }
  const short = (target: ObservedName) => TARGET_LABELS[target].replace(/^Pinboard, /, "")

  console.log("")
  console.log(`Observability: on / off, each against "${TARGET_LABELS.pinboard}" of the same rounds (best round by rate, that`)
  console.log(`round's p99); Pinboard's CPU per request = its CPU time in the window / its requests. Below ${NOTICEABLE} (rate) or above`)
  console.log(`${(1 / NOTICEABLE).toFixed(2)} (p99) is marked *.`)
  const mark = (ratio: number, noticeable: boolean) => `${ratio.toFixed(2)}${noticeable ? "*" : " "}`
  console.log(table(
    ["", ...http.map((s) => s.key)],
    [
      ...OBSERVED.map((on) => [`req/s, ${short(on)} / off`, ...http.map((s) => mark(rateRatio(s, on), rateRatio(s, on) < NOTICEABLE))]),
      ...OBSERVED.map((on) => [`p99, ${short(on)} / off`, ...http.map((s) => mark(p99Ratio(s, on), p99Ratio(s, on) > 1 / NOTICEABLE))]),
      ...(["pinboard", ...OBSERVED] as const).map((target) => [
        `CPU µs/request, ${target === "pinboard" ? "off" : short(target)}`,
        ...http.map((s) => `${cpuPerRequest(s, target)} `)
      ])
    ]
  ))

  console.log("")
  console.log("Scraped once after the measurements: the sum of pinboard_requests_total (every instance request, warm-ups and checks")
  console.log("included; a 499 is a request still in flight when a load generator stopped)")
  let healthy = true
  for (const pinboard of observed) {
    const counted = await scrapeRequests(pinboard.metricsOrigin).catch((error: unknown) => new Error(String(error)))
    const label = `  ${TARGET_LABELS[pinboard.target]}:`.padEnd(36)
    if (counted instanceof Error) {
      console.log(`${label}BROKEN: no scrape (${counted.message})`)
      healthy = false
      continue
    }
    const windows = cells.filter((c) => c.target === pinboard.target).reduce((n, c) => n + c.result.completed, 0)
    const classes = [...counted.byClass].map(([cls, n]) => `${cls} ${fmt(n)}`).join(", ")
    const enough = counted.total >= windows
    if (!enough) healthy = false
    let line = `${label}${fmt(counted.total)} (${classes}); ${fmt(windows)} completed in the timed windows${enough ? "" : ": BROKEN, fewer counted"}`
    if (pinboard.target === "pinboard-logged") {
      // Both are written by the same call when an exchange ends; the lines may still be in the pipe.
      for (const started = performance.now(); pinboard.accessLines() < counted.total && performance.now() - started < DRAIN_MS; ) await sleep(50)
      const lines = pinboard.accessLines()
      const statuses = [...pinboard.accessStatuses].sort().map(([status, n]) => `${status} ${fmt(n)}`).join(", ")
      line += `; access lines read ${fmt(lines)} (${statuses})`
      if (lines !== counted.total) line += `, WARNING: ${fmt(lines - counted.total)} against the counter`
    }
    console.log(line)
  }
  return healthy
}

/** The sum of `pinboard_requests_total` over its series, and per status class. */
const scrapeRequests = async (metricsOrigin: string): Promise<{ total: number; byClass: Map<string, number> }> => {
  const r = await fetch(`${metricsOrigin}/metrics`)
  const text = await r.text()
  if (r.status !== 200) throw new Error(`GET /metrics answered ${r.status}`)
  const byClass = new Map<string, number>()
  let total = 0
  for (const line of text.split("\n")) {
    if (!line.startsWith("pinboard_requests_total{") && !line.startsWith("pinboard_requests_total ")) continue
    const value = Number(line.slice(line.lastIndexOf(" ") + 1))
    const cls = /class="([^"]*)"/.exec(line)?.[1] ?? "?"
    total += value
    byClass.set(cls, (byClass.get(cls) ?? 0) + value)
  }
  return { total, byClass }
}
