// The processes of a benchmark: spawned (pinned to a core when taskset is present), read line
// by line, and stopped by pid, every one of them on every way out.
import { spawnSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { killPid, spawnProcess, type Spawned } from "../test/support/Processes.js"

export const hasTaskset = spawnSync("taskset", ["-V"], { stdio: "ignore" }).status === 0

/** The command line that runs `args` on `core`, or as it is without taskset or a core. */
const pinned = (core: number | undefined, command: string, args: ReadonlyArray<string>): [string, Array<string>] =>
  hasTaskset && core !== undefined ? ["taskset", ["-c", String(core), command, ...args]] : [command, [...args]]

/** Moves a running process, all its threads, to `core`. */
export const pinPid = (pid: number, core: number): void => {
  if (hasTaskset) spawnSync("taskset", ["-a", "-p", "-c", String(core), String(pid)], { stdio: "ignore" })
}

export interface Proc extends Spawned {
  readonly name: string
}

const KEPT_LINES = 200
const running = new Set<Proc>()

/** Spawns `node ...nodeFlags script ...args` (taskset'ed to `core`, if given); the last lines of its output are kept. */
export const spawnNode = (
  name: string,
  core: number | undefined,
  script: string,
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv = process.env,
  nodeFlags: ReadonlyArray<string> = []
): Proc => {
  const [command, argv] = pinned(core, process.execPath, [...nodeFlags, script, ...args])
  const proc: Proc = Object.assign(spawnProcess(command, argv, { env }, { name, keptLines: KEPT_LINES }), { name })
  running.add(proc)
  void proc.exited.then(() => running.delete(proc))
  return proc
}

/** Spawns `command ...args` (taskset'ed to `core`, if given), tracked and stopped like spawnNode's processes. */
export const spawnPinned = (name: string, core: number | undefined, command: string, args: ReadonlyArray<string>): Proc => {
  const [pinnedCommand, argv] = pinned(core, command, args)
  const proc: Proc = Object.assign(spawnProcess(pinnedCommand, argv, {}, { name, keptLines: KEPT_LINES }), { name })
  running.add(proc)
  void proc.exited.then(() => running.delete(proc))
  return proc
}

/** SIGKILL by pid unless it has already exited; resolves once it has. */
export const stop = async (proc: Proc): Promise<void> => {
  await proc.kill()
}

/** For exit paths that cannot wait. */
export const stopAllSync = (): void => {
  for (const proc of running) killPid(proc.pid)
}

export const stopAll = (): Promise<unknown> => Promise.all([...running].map(stop))

/** User plus system CPU time of a process so far, in seconds (from /proc; 0 where there is none). */
export const cpuSeconds = (pid: number): number => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    // utime and stime are fields 14 and 15 of stat(5), counted from the state (field 3).
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  } catch {
    return 0
  }
}

/**
 * CPU time the whole machine has spent busy so far, in core-seconds: the first line of
 * /proc/stat, user + nice + system + irq + softirq (guest time is inside user already; idle,
 * iowait and steal are not work done on this machine).
 */
export const machineBusySeconds = (): number => {
  const fields = readFileSync("/proc/stat", "utf8").slice(0, 256).split("\n", 1)[0]!.trim().split(/\s+/)
  if (fields[0] !== "cpu") throw new Error("/proc/stat: no cpu line")
  const [user, nice, system, , , irq, softirq] = fields.slice(1).map(Number) as [number, number, number, number, number, number, number]
  return (user + nice + system + irq + softirq) / CLOCK_TICKS
}

/**
 * Every process's user plus system CPU time so far, in seconds, by pid, with its name (kernel
 * threads included), and that of its children that have exited and been waited for (where
 * the CPU of short-lived commands ends up).
 */
export const everyCpuSeconds = (): Map<number, { readonly name: string; readonly seconds: number }> => {
  const all = new Map<number, { name: string; seconds: number }>()
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      // utime, stime, cutime, cstime: fields 14 to 17 of stat(5).
      all.set(Number(entry), { name, seconds: (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS })
    } catch {
      // Gone meanwhile.
    }
  }
  return all
}

/** This process's own user plus system CPU time so far, in seconds. */
export const ownCpuSeconds = (): number => {
  const { user, system } = process.cpuUsage()
  return (user + system) / 1e6
}

/** A memory figure of /proc/<pid>/status in KiB, or undefined when the process is gone. */
const statusKiB = (pid: number, field: "VmRSS" | "VmHWM"): number | undefined => {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return match ? Number(match[1]) : undefined
  } catch {
    return undefined
  }
}

/** Resident set size in KiB (VmRSS), or undefined when the process is gone. */
export const rssKiB = (pid: number): number | undefined => statusKiB(pid, "VmRSS")

/** The largest resident set size so far in KiB (VmHWM), or undefined when the process is gone. */
export const peakRssKiB = (pid: number): number | undefined => statusKiB(pid, "VmHWM")

/** Open file descriptors (sockets included), or undefined when the process is gone. */
export const openFds = (pid: number): number | undefined => {
  try {
    return readdirSync(`/proc/${pid}/fd`).length
  } catch {
    return undefined
  }
}

const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100

export interface StopGuard {
  /** Whether a signal or the hard limit began the stop (the run then fails as stopped, not broken). */
  readonly stopping: () => boolean
  /** The run is over: the hard limit no longer applies. */
  readonly disarm: () => void
}

/**
 * Every process a bench started is stopped by its pid on every way out: `stopSync` on exit, and
 * on a signal or past `hardLimitMs` at once, then `stop` (at most 2 s, so no zombie is left)
 * before the exit.
 */
export const stopOnEveryExit = (hardLimitMs: number, stopSync: () => void, stop: () => Promise<unknown>): StopGuard => {
  let stopping = false
  const stopAndExit = (code: number) => {
    stopping = true
    stopSync()
    void Promise.race([Promise.allSettled([stop()]), new Promise((resolve) => setTimeout(resolve, 2000))]).finally(() => process.exit(code))
  }
  const hardLimit = setTimeout(() => {
    console.error(`bench: over ${hardLimitMs / 1000} s, stopping`)
    stopAndExit(1)
  }, hardLimitMs)
  hardLimit.unref()
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => stopAndExit(130))
  process.once("exit", stopSync)
  return { stopping: () => stopping, disarm: () => clearTimeout(hardLimit) }
}
