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

/** Resident set size in KiB (VmRSS), or undefined when the process is gone. */
export const rssKiB = (pid: number): number | undefined => {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return match ? Number(match[1]) : undefined
  } catch {
    return undefined
  }
}

/** Open file descriptors (sockets included), or undefined when the process is gone. */
export const openFds = (pid: number): number | undefined => {
  try {
    return readdirSync(`/proc/${pid}/fd`).length
  } catch {
    return undefined
  }
}

const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100
