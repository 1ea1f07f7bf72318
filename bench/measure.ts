// One measurement of bench/proxy.ts: a load generator on LOAD_CORE (wrk for HTTP,
// bench/wrk.ts; the Node client of bench/load.ts for WebSocket echo and for the benchmarks
// that still use autocannon), the servers' CPU time read around its window, and a check
// that no server died meanwhile. Around the same window: the load generator's CPU time, and
// the whole machine's busy time (/proc/stat), so that what every other process used in the
// window can be told apart from the measured ones, and every process's CPU time, to name the
// busiest of those others.
import type { LoadResult, LoadSpec } from "./load.js"
import { cpuSeconds, everyCpuSeconds, machineBusySeconds, ownCpuSeconds, spawnNode, stop, type Proc } from "./processes.js"
import { LOAD_CORE, script } from "./proxyTargets.js"
import { runWrk, type WrkResult, type WrkSpec } from "./wrk.js"

/** The server processes whose CPU is read around the window, by role (the pids of one role summed). */
export interface Watched {
  readonly proxy: ReadonlyArray<number>
  readonly worker: number
  readonly redis: ReadonlyArray<number>
}

/** Share of one core during the window, per role (undefined: the role was not involved). */
export interface CpuShares {
  readonly proxy?: number
  readonly worker: number
  readonly redis?: number
  /** The load generator's: wrk, or the Node client. */
  readonly load: number
  /**
   * Every other process on the machine: /proc/stat's busy time less the watched processes,
   * the load generator and this process (the bench's own, which heartbeats and reads the
   * servers' output). Idle targets are in it; a round where it is high was a noisy one.
   */
  readonly others: number
  /**
   * The other processes that used the most of it (share of a core each, with their exited
   * children's, above 0.02), busiest first; at most 3.
   */
  readonly busiest: ReadonlyArray<{ readonly pid: number; readonly name: string; readonly share: number }>
  /** The seconds the shares are of: multiplied by a share, the CPU seconds of the window. */
  readonly seconds: number
}

export interface Measured<R extends LoadResult = LoadResult> {
  readonly result: R
  readonly cpu: CpuShares
}

export interface Reading {
  readonly proxy: number
  readonly worker: number
  readonly redis: number
  readonly machine: number
  readonly own: number
  readonly at: number
  /** Every process's CPU seconds, to name the busiest of the others. */
  readonly every: ReadonlyMap<number, { readonly name: string; readonly seconds: number }>
}

const total = (pids: ReadonlyArray<number>) => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0)
export const reading = (watched: Watched): Reading => ({
  every: everyCpuSeconds(),
  proxy: total(watched.proxy),
  worker: cpuSeconds(watched.worker),
  redis: total(watched.redis),
  machine: machineBusySeconds(),
  own: ownCpuSeconds(),
  at: performance.now()
})

/** The other processes busiest between the readings: every pid but the watched ones, `exclude` and this process. */
const busiestOf = (watched: Watched, before: Reading, after: Reading, exclude: ReadonlyArray<number>, seconds: number): CpuShares["busiest"] => {
  const known = new Set([...watched.proxy, watched.worker, ...watched.redis, ...exclude, process.pid])
  return [...after.every]
    .filter(([pid]) => !known.has(pid))
    .map(([pid, { name, seconds: cpu }]) => ({ pid, name, share: (cpu - (before.every.get(pid)?.seconds ?? 0)) / seconds }))
    .filter(({ share }) => share > 0.02)
    .sort((a, b) => b.share - a.share)
    .slice(0, 3)
}

/**
 * The shares over `seconds`, the load generator (`loadPids`) having used `loadCpu` seconds
 * between the readings.
 */
export const sharesOf = (watched: Watched, before: Reading, after: Reading, loadCpu: number, loadPids: ReadonlyArray<number>, seconds: number): CpuShares => {
  const delta = (role: "proxy" | "worker" | "redis" | "machine" | "own") => after[role] - before[role]
  const known = delta("proxy") + delta("worker") + delta("redis") + loadCpu + delta("own")
  return {
    ...(watched.proxy.length === 0 ? {} : { proxy: delta("proxy") / seconds }),
    worker: delta("worker") / seconds,
    ...(watched.redis.length === 0 ? {} : { redis: delta("redis") / seconds }),
    load: loadCpu / seconds,
    // The clock ticks of /proc make it a little negative at times: nothing else ran.
    others: Math.max(0, delta("machine") - known) / seconds,
    busiest: busiestOf(watched, before, after, loadPids, seconds),
    seconds
  }
}

export const checkAlive = (alive: ReadonlyArray<Proc>) => {
  for (const proc of alive) {
    if (!proc.alive()) throw new Error(`${proc.name} exited; output:\n${proc.lines.join("\n")}`)
  }
}

/**
 * Runs one load process of bench/load.ts for `spec`; `label` names it in errors, `alive` must
 * all still run after it. `onWindow` is told when the measured window starts and ends.
 */
export const measureLoad = async (
  label: string,
  spec: LoadSpec,
  watched: Watched,
  alive: ReadonlyArray<Proc>,
  onWindow: (edge: "start" | "end") => void = () => {}
): Promise<Measured> => {
  let before = reading(watched)
  let after = before
  let loadBefore = 0
  let loadAfter = 0
  const load = spawnNode("load generator", LOAD_CORE, script("load.js"), [JSON.stringify(spec)])
  load.onLine((line) => {
    if (line === "window start") {
      before = reading(watched)
      loadBefore = cpuSeconds(load.pid)
      onWindow("start")
    } else if (line === "window end") {
      after = reading(watched)
      loadAfter = cpuSeconds(load.pid)
      onWindow("end")
    }
  })
  const limit = setTimeout(() => void stop(load), (spec.warmupS + spec.seconds + 30) * 1000)
  const { code } = await load.exited
  clearTimeout(limit)
  const json = [...load.lines].reverse().find((line) => line.startsWith("{"))
  if (code !== 0 || json === undefined) throw new Error(`load generator for ${label}: exit ${code}; output:\n${load.lines.join("\n")}`)
  checkAlive(alive)
  const result = JSON.parse(json) as LoadResult
  return { result, cpu: sharesOf(watched, before, after, loadAfter - loadBefore, [load.pid], result.seconds) }
}

/** A pause after the warm-up: the servers finish with the warm-up's closed connections before the window. */
const SETTLE_MS = 250

/**
 * One HTTP measurement with wrk on LOAD_CORE: a warm-up run of `warmupS` (whole seconds),
 * then the measured run, the servers' CPU read just before it starts and just after it exits.
 */
export const measureHttp = async (
  label: string,
  spec: WrkSpec & { readonly warmupS: number },
  watched: Watched,
  alive: ReadonlyArray<Proc>
): Promise<Measured<WrkResult>> => {
  if (spec.warmupS > 0) {
    await runWrk(`${label} (warm-up)`, { ...spec, seconds: Math.max(1, Math.round(spec.warmupS)) }, LOAD_CORE)
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
  }
  const before = reading(watched)
  const result = await runWrk(label, { ...spec, seconds: Math.max(1, Math.round(spec.seconds)) }, LOAD_CORE)
  const after = reading(watched)
  checkAlive(alive)
  // wrk starts after the first reading and has exited before the second: in neither.
  return { result, cpu: sharesOf(watched, before, after, result.cpuSeconds, [], (after.at - before.at) / 1000) }
}
