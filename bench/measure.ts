// One measurement of bench/proxy.ts: a load-generator process (bench/load.ts) on LOAD_CORE,
// the servers' CPU time read around its window, and a check that no server died meanwhile.
import type { LoadResult, LoadSpec } from "./load.js"
import { cpuSeconds, spawnNode, stop, type Proc } from "./processes.js"
import { LOAD_CORE, script } from "./proxyTargets.js"

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
}

export interface Measured {
  readonly result: LoadResult
  readonly cpu: CpuShares
}

/**
 * Runs one load process for `spec`; `label` names it in errors, `alive` must all still run after it.
 * `onWindow` is told when the measured window starts and ends.
 */
export const measureLoad = async (
  label: string,
  spec: LoadSpec,
  watched: Watched,
  alive: ReadonlyArray<Proc>,
  onWindow: (edge: "start" | "end") => void = () => {}
): Promise<Measured> => {
  const total = (pids: ReadonlyArray<number>) => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0)
  const read = () => ({ proxy: total(watched.proxy), worker: cpuSeconds(watched.worker), redis: total(watched.redis) })
  let before = read()
  let after = before
  const load = spawnNode("load generator", LOAD_CORE, script("load.js"), [JSON.stringify(spec)])
  load.onLine((line) => {
    if (line === "window start") {
      before = read()
      onWindow("start")
    } else if (line === "window end") {
      after = read()
      onWindow("end")
    }
  })
  const limit = setTimeout(() => void stop(load), (spec.warmupS + spec.seconds + 30) * 1000)
  const { code } = await load.exited
  clearTimeout(limit)
  const json = [...load.lines].reverse().find((line) => line.startsWith("{"))
  if (code !== 0 || json === undefined) throw new Error(`load generator for ${label}: exit ${code}; output:\n${load.lines.join("\n")}`)
  for (const proc of alive) {
    if (!proc.alive()) throw new Error(`${proc.name} exited; output:\n${proc.lines.join("\n")}`)
  }
  const result = JSON.parse(json) as LoadResult
  const share = (role: "proxy" | "worker" | "redis") => (after[role] - before[role]) / result.seconds
  return {
    result,
    cpu: {
      ...(watched.proxy.length === 0 ? {} : { proxy: share("proxy") }),
      worker: share("worker"),
      ...(watched.redis.length === 0 ? {} : { redis: share("redis") })
    }
  }
}
