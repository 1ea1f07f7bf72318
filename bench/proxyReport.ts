// The report of bench/proxy.ts: one table per scenario, Pinboard's ratios to the floors and to
// node-http-proxy, the other ratios between targets, and the verdicts against the targets of
// docs/proxy.md "What a request costs" (printed, never asserted).
import type { LoadResult } from "./load.js"
import type { CpuShares } from "./measure.js"
import { TARGET_LABELS, type TargetName } from "./proxyTargets.js"

export interface Scenario {
  readonly key: string
  readonly title: string
  readonly kind: "http" | "ws"
  readonly path: "small" | "large" | "huge" | "upload" | "ws"
  readonly method: "GET" | "POST"
  /** The request body of each request (POST), bytes. */
  readonly bodyBytes: number
  /** The body of each answer, or each echoed message, bytes: fewer bytes received per response is a broken run. */
  readonly answerBytes: number
  readonly connections: number
}

export interface Cell {
  readonly scenario: Scenario
  readonly target: TargetName
  readonly round: number
  readonly result: LoadResult
  /** Share of one core during the window, per process (undefined: not involved), the load generator's and every other's. */
  readonly cpu: CpuShares
}

/**
 * Other processes using more than this share of a core during a window: a noisy window,
 * marked `!`. On a quiet machine "other" reads about 0.05 to 0.15: the idle targets, kernel
 * threads, the machine's own services, and /proc/stat's tick sampling against the processes'
 * exact times.
 */
export const NOISY = 0.2

/** CPU time per request of one role in one window, µs (NaN when the role was not involved). */
export const cpuPerRequestUs = (cell: Pick<Cell, "cpu" | "result">, role: "proxy" | "worker" | "redis"): number =>
  ((cell.cpu[role] ?? NaN) * cell.cpu.seconds * 1e6) / Math.max(cell.result.completed, 1)

/** Errors, timeouts or non-2xx answers, or fewer bytes per response than the answer's body. */
export const brokenCell = (cell: Pick<Cell, "scenario" | "result">): boolean =>
  cell.result.errors + cell.result.timeouts + cell.result.non2xx > 0 || cell.result.bytesEach < cell.scenario.answerBytes

export const report = (
  cells: ReadonlyArray<Cell>,
  scenarios: ReadonlyArray<Scenario>,
  targets: ReadonlyArray<TargetName>,
  rounds: number
): boolean => {
  const of = (scenario: Scenario, target: TargetName) => cells.filter((c) => c.scenario === scenario && c.target === target)
  const medianOf = (scenario: Scenario, target: TargetName, figure: (cell: Cell) => number) => median(of(scenario, target).map(figure))
  const rate = (scenario: Scenario, target: TargetName) => medianOf(scenario, target, (c) => c.result.perSecond)
  const p50 = (scenario: Scenario, target: TargetName) => medianOf(scenario, target, (c) => c.result.p50)
  const p99 = (scenario: Scenario, target: TargetName) => medianOf(scenario, target, (c) => c.result.p99)
  const cpuUs = (scenario: Scenario, target: TargetName) => medianOf(scenario, target, (c) => cpuPerRequestUs(c, "proxy"))
  const has = (target: TargetName) => targets.includes(target)
  const http = scenarios.filter((s) => s.kind === "http")

  console.log("")
  console.log(`Medians over ${rounds} round${rounds === 1 ? "" : "s"} (max: the largest of any round). HTTP: wrk's figures (Requests/sec, its`)
  console.log(`latency distribution's 50% and 99%, its Max); WebSocket: the Node client's. errors = socket errors + timeouts /`)
  console.log(`non-2xx, summed over the rounds; bytes each = bytes received per response, headers included. CPU µs/req = each`)
  console.log(`process's CPU time in the window (/proc) / the requests it completed. load gen = cores used by the load generator`)
  console.log(`(wrk, on core 0); other = cores used by every other process on the machine in the window (/proc/stat's busy time`)
  console.log(`less all of those and this process). "rounds" lists each round's rate and its "other"; ! marks a noisy round`)
  console.log(`(other > ${NOISY} of a core): repeat the run if the medians lean on one.`)
  for (const scenario of scenarios) {
    const unit = scenario.kind === "ws" ? "msg" : "req"
    console.log("")
    console.log(`${scenario.title} (${scenario.kind === "ws" ? "messages/s" : "requests/s"})`)
    console.log(table(
      ["target", `${unit}/s`, "p50 ms", "p99 ms", "max ms", "errors", "bytes each", `CPU µs/${unit}: proxy`, "worker", "redis", "load gen", "other", "rounds (other)"],
      targets.filter((target) => of(scenario, target).length > 0).map((target) => {
        const all = of(scenario, target)
        const errors = all.reduce((n, c) => n + c.result.errors + c.result.timeouts, 0)
        const non2xx = all.reduce((n, c) => n + c.result.non2xx, 0)
        return [
          TARGET_LABELS[target],
          fmt(rate(scenario, target)),
          ms(p50(scenario, target)),
          ms(p99(scenario, target)),
          ms(Math.max(...all.map((c) => c.result.max))),
          `${errors}/${non2xx}`,
          fmt(medianOf(scenario, target, (c) => c.result.bytesEach)),
          us(medianOf(scenario, target, (c) => cpuPerRequestUs(c, "proxy"))),
          us(medianOf(scenario, target, (c) => cpuPerRequestUs(c, "worker"))),
          us(medianOf(scenario, target, (c) => cpuPerRequestUs(c, "redis"))),
          share(medianOf(scenario, target, (c) => c.cpu.load)),
          share(medianOf(scenario, target, (c) => c.cpu.others)),
          all.map((c) => `${fmt(c.result.perSecond)} (${c.cpu.others.toFixed(2)}${c.cpu.others > NOISY ? "!" : ""})`).join(" ")
        ]
      })
    ))
  }

  // Pinboard against the floors and node-http-proxy
  const against = (figure: (s: Scenario, t: TargetName) => number, a: TargetName, b: TargetName) => (s: Scenario) =>
    has(a) && has(b) ? (figure(s, a) / figure(s, b)).toFixed(2) : "-"
  const pinboards = (["pinboard", "pinboard-compare"] as const).filter(has)
  for (const pinboard of pinboards) {
    const name = pinboard === "pinboard" ? "Pinboard" : "The --compare build"
    console.log("")
    console.log(`${name} against the floors (undici + EVALSHA, undici + EVALSHA + Effect: --floors) and node-http-proxy, medians over`)
    console.log(`the rounds: rates, p99s, and the proxy process's CPU per request${has("undici-effect") ? "" : " (the floors' columns need --floors)"}`)
    const columns: Array<[string, (s: Scenario) => string]> = [
      ["rate / EVALSHA", against(rate, pinboard, "undici-evalsha")],
      ["rate / +Effect", against(rate, pinboard, "undici-effect")],
      ["rate / n-h-p", against(rate, pinboard, "http-proxy")],
      ["p99 / +Effect", against(p99, pinboard, "undici-effect")],
      ["p99 / n-h-p", against(p99, pinboard, "http-proxy")],
      ["CPU / +Effect", against(cpuUs, pinboard, "undici-effect")],
      ["CPU / n-h-p", against(cpuUs, pinboard, "http-proxy")]
    ]
    console.log(table(["", ...columns.map(([name]) => name)], scenarios.map((s) => [s.key, ...columns.map(([, cell]) => cell(s))])))
  }

  const pairs: ReadonlyArray<[TargetName, TargetName]> = (
    [
      ["pinboard", "undici"],
      ["pinboard", "direct"],
      ["http-proxy", "direct"],
      ["undici", "direct"],
      ["http-proxy", "undici"],
      ["undici-evalsha", "undici"],
      ["undici-effect", "undici"],
      ["pinboard", "pinboard-compare"]
    ] satisfies Array<[TargetName, TargetName]>
  ).filter(([a, b]) => has(a) && has(b))
  console.log("")
  console.log("Other ratios of rates (medians over the rounds)")
  console.log(table(
    ["", ...pairs.map(([a, b]) => `${short(a)} / ${short(b)}`)],
    scenarios.map((s) => [s.key, ...pairs.map(([a, b]) => (rate(s, a) / rate(s, b)).toFixed(2))])
  ))

  console.log("")
  console.log("CPU per request of each proxy, µs (its CPU time in the window / its requests; medians over the rounds)")
  const cpuTargets = (["pinboard", "pinboard-compare", "http-proxy", "undici", "undici-evalsha", "undici-effect"] as const).filter(has)
  console.log(table(
    ["", ...http.map((s) => s.key)],
    cpuTargets.map((target) => [TARGET_LABELS[target], ...http.map((s) => cpuUs(s, target).toFixed(0))])
  ))

  // The targets of the issue
  const key = (path: Scenario["path"], connections: number) => {
    const found = scenarios.find((s) => s.path === path && s.connections === connections)
    if (found === undefined) throw new Error(`no scenario ${path}/${connections}`)
    return found
  }
  const [small32, small128, large32, large128] = [key("small", 32), key("small", 128), key("large", 32), key("large", 128)]
  const ws = scenarios.find((s) => s.kind === "ws")
  const verdict = (ratio: number, ok: boolean) => `${ratio.toFixed(2)} ${ok ? "meets" : "MISSES"}`
  console.log("")
  console.log(`Targets (medians over ${rounds} round${rounds === 1 ? "" : "s"}${rounds < 3 ? "; fewer than 3: indicative only" : ""}; printed, never asserted)`)
  const floor: TargetName = "undici-effect"
  for (const pinboard of pinboards) {
    const name = pinboard === "pinboard" ? "Pinboard" : "The --compare build"
    if (has(floor)) {
      const rateRatio = (s: Scenario) => rate(s, pinboard) / rate(s, floor)
      const atLeast = (s: Scenario, limit: number) => `${s.key} ${verdict(rateRatio(s), rateRatio(s) >= limit)}`
      const p99Ratio = p99(small128, pinboard) / p99(small128, floor)
      const floorTail = p99(small128, floor) / p50(small128, floor)
      console.log(`  ${name} / undici + EVALSHA + Effect, rate >= 0.85, 64-byte GET:    ${atLeast(small32, 0.85)}; ${atLeast(small128, 0.85)}`)
      console.log(`  ${name} / undici + EVALSHA + Effect, rate >= 0.9, 64 KiB GET:      ${atLeast(large32, 0.9)}`)
      console.log(
        `  ${name} p99 / that floor's p99 <= 1.5, 64-byte GET:               ${small128.key} ${verdict(p99Ratio, p99Ratio <= 1.5)}` +
          (floorTail > 3
            ? ` (the floor's own p99 is abnormal: ${floorTail.toFixed(1)}x its p50, ${ms(p99(small128, floor))} against ${ms(p50(small128, floor))} ms)`
            : ` (the floor's p99 is ${floorTail.toFixed(1)}x its p50)`)
      )
    } else {
      console.log(`  ${name}: the floor targets need --floors`)
    }
    if (has("http-proxy")) {
      const cpuRatio = (s: Scenario) => cpuUs(s, pinboard) / cpuUs(s, "http-proxy")
      const atMost = (s: Scenario) => `${s.key} ${verdict(cpuRatio(s), cpuRatio(s) <= 1.0)}`
      console.log(`  ${name} / node-http-proxy, CPU per request <= 1.0, 64 KiB GET:    ${atMost(large32)}; ${atMost(large128)}`)
    }
  }
  if (ws !== undefined && has("pinboard") && has("direct")) {
    const wsRatio = rate(ws, "pinboard") / rate(ws, "direct")
    console.log(`  WebSocket, Pinboard / direct >= 0.3:                               ${ws.key} ${verdict(wsRatio, wsRatio >= 0.3)}`)
  }

  const noisy = cells.filter((c) => c.cpu.others > NOISY)
  if (noisy.length > 0) {
    console.log("")
    console.log(`Noisy windows (other processes above ${NOISY} of a core): ${noisy.length} of ${cells.length}`)
    for (const c of noisy) {
      console.log(`  round ${c.round}, ${c.scenario.key}, ${TARGET_LABELS[c.target]}: other ${c.cpu.others.toFixed(2)} (busiest: ${busiestText(c.cpu)})`)
    }
  }

  const faulty = cells.filter(brokenCell)
  for (const c of faulty) {
    console.log(
      `BROKEN round ${c.round}, ${c.scenario.title}, ${TARGET_LABELS[c.target]}: ${c.result.errors} errors, ` +
        `${c.result.timeouts} timeouts, ${c.result.non2xx} non-2xx ${JSON.stringify(c.result.statuses)}, ` +
        `${fmt(c.result.bytesEach)} bytes per response (the answer has ${fmt(c.scenario.answerBytes)})`
    )
  }
  return faulty.length === 0
}

// ---------------------------------------------------------------------------------------
// Helpers

const SHORT: Record<TargetName, string> = {
  direct: "direct",
  pinboard: "Pinboard",
  "http-proxy": "n-h-p",
  undici: "undici",
  "undici-evalsha": "EVALSHA",
  "undici-effect": "+Effect",
  "pinboard-metrics": "metrics",
  "pinboard-logged": "logged",
  "pinboard-compare": "compare"
}
const short = (target: TargetName): string => SHORT[target]

export const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

export const fmt = (n: number): string => Math.round(n).toLocaleString("en-US")
export const ms = (n: number): string => n.toFixed(2)
export const us = (n: number): string => (Number.isNaN(n) ? "-" : n.toFixed(0))
export const share = (n: number | undefined): string => (n === undefined || Number.isNaN(n) ? "-" : n.toFixed(2))
export const broken = (r: LoadResult): string => `${r.errors + r.timeouts}/${r.non2xx}`
/** The busiest other processes of a noisy window, `name pid share` each. */
export const busiestText = (cpu: CpuShares): string =>
  cpu.busiest.length === 0 ? "none above 0.02 by itself" : cpu.busiest.map((p) => `${p.name} ${p.pid} ${p.share.toFixed(2)}`).join(", ")
export const cpuText = (cpu: CpuShares): string =>
  `core 1: proxy ${share(cpu.proxy)} worker ${share(cpu.worker)} redis ${share(cpu.redis)}; load gen ${share(cpu.load)}; other ${share(cpu.others)}` +
  (cpu.others > NOISY ? `! (${busiestText(cpu)})` : "")

export const table = (head: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ")
  return [line(head), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n")
}
