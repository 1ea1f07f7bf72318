// The report of bench/proxy.ts: one table per scenario, the ratios between targets, and the
// verdicts against the targets of docs/proxy.md "What a request costs".
import type { LoadResult } from "./load.js"
import { TARGET_LABELS, type TargetName } from "./proxyTargets.js"

export interface Scenario {
  readonly key: string
  readonly title: string
  readonly kind: "http" | "ws"
  readonly path: "small" | "large" | "ws"
  readonly connections: number
}

export interface Cell {
  readonly scenario: Scenario
  readonly target: TargetName
  readonly round: number
  readonly result: LoadResult
  /** Share of one core during the window, per server process (undefined: not involved). */
  readonly cpu: { readonly proxy?: number; readonly worker: number; readonly redis?: number }
}

export const report = (
  cells: ReadonlyArray<Cell>,
  scenarios: ReadonlyArray<Scenario>,
  targets: ReadonlyArray<TargetName>,
  rounds: number
): boolean => {
  const of = (scenario: Scenario, target: TargetName) => cells.filter((c) => c.scenario === scenario && c.target === target)
  /** The round with the most throughput, with its own latencies. */
  const best = (scenario: Scenario, target: TargetName) =>
    of(scenario, target).reduce((a, b) => (b.result.perSecond > a.result.perSecond ? b : a))

  console.log("")
  console.log(`Each row is the best of ${rounds} round${rounds === 1 ? "" : "s"} by rate, with that round's latencies; "rounds" lists every`)
  console.log(`round's rate; errors (errors+timeouts/non-2xx) are summed over the rounds; bytes each = bytes received per`)
  console.log(`response, headers included; core 1 = share of core 1 used during the window by the proxy, the worker, redis-server.`)
  for (const scenario of scenarios) {
    console.log("")
    console.log(`${scenario.title} (${scenario.kind === "ws" ? "messages/s" : "requests/s"})`)
    console.log(table(
      ["target", scenario.kind === "ws" ? "msg/s" : "req/s", "p50 ms", "p99 ms", "errors/non-2xx", "bytes each", "rounds", "core 1: proxy", "worker", "redis"],
      targets.filter((target) => of(scenario, target).length > 0).map((target) => {
        const b = best(scenario, target)
        const all = of(scenario, target)
        const sum = all.reduce((n, c) => n + c.result.errors + c.result.timeouts, 0)
        const bad = all.reduce((n, c) => n + c.result.non2xx, 0)
        return [
          TARGET_LABELS[target],
          fmt(b.result.perSecond),
          ms(b.result.p50),
          ms(b.result.p99),
          `${sum}/${bad}`,
          fmt(b.result.bytesEach),
          all.map((c) => fmt(c.result.perSecond)).join(" "),
          share(b.cpu.proxy),
          share(b.cpu.worker),
          share(b.cpu.redis)
        ]
      })
    ))
  }

  const rate = (scenario: Scenario, target: TargetName) => best(scenario, target).result.perSecond
  const ratio = (scenario: Scenario, a: TargetName, b: TargetName) => rate(scenario, a) / rate(scenario, b)
  console.log("")
  console.log("Ratios of rates (best of rounds)")
  const pairs: ReadonlyArray<[TargetName, TargetName]> = [
    ["pinboard", "http-proxy"],
    ["pinboard", "undici"],
    ["pinboard", "direct"],
    ["http-proxy", "direct"],
    ["undici", "direct"],
    ["http-proxy", "undici"],
    ...(targets.includes("undici-effect")
      ? ([["pinboard", "undici-effect"], ["undici-effect", "undici"]] satisfies Array<[TargetName, TargetName]>)
      : []),
    ...(targets.includes("pinboard-compare") ? ([["pinboard", "pinboard-compare"]] satisfies Array<[TargetName, TargetName]>) : []),
    ...(targets.includes("pinboard-compare") && targets.includes("undici-effect")
      ? ([["pinboard-compare", "undici-effect"]] satisfies Array<[TargetName, TargetName]>)
      : [])
  ]
  console.log(table(
    ["", ...scenarios.map((s) => s.key)],
    pairs.map(([a, b]) => [`${TARGET_LABELS[a]} / ${TARGET_LABELS[b]}`, ...scenarios.map((s) => ratio(s, a, b).toFixed(2))])
  ))

  const [small32, small128, large32, , ws] = scenarios as [Scenario, Scenario, Scenario, Scenario, Scenario]
  const verdict = (ok: boolean) => (ok ? "meets" : "MISSES")
  const medianOf = (scenario: Scenario, target: TargetName, figure: (cell: Cell) => number) => median(of(scenario, target).map(figure))
  const cpuPerRequestUs = (cell: Cell) => ((cell.cpu.proxy ?? NaN) * 1e6) / cell.result.perSecond
  console.log("")
  console.log("Targets (medians over the rounds)")
  if (targets.includes("undici-effect")) {
    const floor: TargetName = "undici-effect"
    for (const pinboard of (["pinboard", "pinboard-compare"] as const).filter((t) => targets.includes(t))) {
      const rateRatio = (scenario: Scenario) =>
        medianOf(scenario, pinboard, (c) => c.result.perSecond) / medianOf(scenario, floor, (c) => c.result.perSecond)
      const p99Ratio = (scenario: Scenario) => medianOf(scenario, pinboard, (c) => c.result.p99) / medianOf(scenario, floor, (c) => c.result.p99)
      const atLeast = (scenario: Scenario, limit: number) => `${scenario.key} ${rateRatio(scenario).toFixed(2)} ${verdict(rateRatio(scenario) >= limit)}`
      const atMost = (scenario: Scenario, limit: number) => `${scenario.key} ${p99Ratio(scenario).toFixed(2)} ${verdict(p99Ratio(scenario) <= limit)}`
      const name = pinboard === "pinboard" ? "Pinboard" : "The --compare build"
      console.log(`  ${name} / undici + EVALSHA + Effect >= 0.85, 64-byte GET:  ${atLeast(small32, 0.85)}; ${atLeast(small128, 0.85)}`)
      console.log(`  ${name} / undici + EVALSHA + Effect >= 0.9, 64 KiB GET:    ${atLeast(large32, 0.9)}`)
      console.log(`  ${name} p99 / that floor's p99 <= 1.5, 64-byte GET:        ${atMost(small32, 1.5)}; ${atMost(small128, 1.5)}`)
    }
  } else {
    console.log("  (the floor targets need --floors)")
  }
  const wsRatio = medianOf(ws, "pinboard", (c) => c.result.perSecond) / medianOf(ws, "direct", (c) => c.result.perSecond)
  console.log(`  WebSocket Pinboard / direct >= 0.3:  ${ws.key} ${wsRatio.toFixed(2)} ${verdict(wsRatio >= 0.3)}`)
  if (targets.includes("undici-effect")) {
    console.log("")
    console.log("CPU per request, µs (the proxy's share of core 1 / its rate; medians over the rounds)")
    const cpuTargets = (["pinboard", "pinboard-compare", "undici", "undici-evalsha", "undici-effect"] as const).filter((t) => targets.includes(t))
    console.log(table(
      ["", ...scenarios.filter((s) => s.kind === "http").map((s) => s.key)],
      cpuTargets.map((target) => [
        TARGET_LABELS[target],
        ...scenarios.filter((s) => s.kind === "http").map((s) => medianOf(s, target, cpuPerRequestUs).toFixed(0))
      ])
    ))
  }

  const faulty = cells.filter((c) => c.result.errors + c.result.timeouts + c.result.non2xx > 0)
  for (const c of faulty) {
    console.log(
      `BROKEN round ${c.round}, ${c.scenario.title}, ${TARGET_LABELS[c.target]}: ${c.result.errors} errors, ` +
        `${c.result.timeouts} timeouts, ${c.result.non2xx} non-2xx ${JSON.stringify(c.result.statuses)}`
    )
  }
  return faulty.length === 0
}

// ---------------------------------------------------------------------------------------
// Helpers

export const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

export const fmt = (n: number): string => Math.round(n).toLocaleString("en-US")
export const ms = (n: number): string => n.toFixed(2)
export const share = (n: number | undefined): string => (n === undefined ? "-" : n.toFixed(2))
export const broken = (r: LoadResult): string => `${r.errors + r.timeouts}/${r.non2xx}`
export const cpuText = (cpu: Cell["cpu"]): string => `proxy ${share(cpu.proxy)} worker ${share(cpu.worker)} redis ${share(cpu.redis)}`

export const table = (head: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ")
  return [line(head), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n")
}
