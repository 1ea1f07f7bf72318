// The soak's child processes: spawned with their output read line by line (the last lines kept
// for a failure report), watched for exits nobody asked for, and stopped by pid on every way
// out (normal end, SIGINT/SIGTERM, an uncaught error, the hard time limit).
import { spawn, type ChildProcess } from "node:child_process"
import { createInterface } from "node:readline"

const KEPT_LINES = 100

export interface Child {
  readonly name: string
  readonly pid: number
  readonly child: ChildProcess
  readonly lines: Array<string>
  /** Lines printed so far (all of them, not only the kept ones). */
  lineCount: number
  /** Set before the soak stops it, so the exit is not reported as unexpected. */
  expectedExit: boolean
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly alive: () => boolean
  readonly waitForLine: (pattern: RegExp, timeoutMs: number) => Promise<RegExpMatchArray>
}

const running = new Set<Child>()

/** Spawns `node args...`; `onUnexpectedExit` runs when it exits without `expectedExit` set. */
export const spawnNode = (
  name: string,
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  onUnexpectedExit: (child: Child, code: number | null, signal: NodeJS.Signals | null) => void
): Child => {
  const child = spawn(process.execPath, [...args], { env, stdio: ["ignore", "pipe", "pipe"] })
  if (child.pid === undefined) throw new Error(`${name}: could not spawn`)
  const lines: Array<string> = []
  const listeners = new Set<(line: string) => void>()
  let done = false
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => {
      done = true
      running.delete(proc)
      if (!proc.expectedExit) onUnexpectedExit(proc, code, signal)
      resolve({ code, signal })
    })
  )
  const proc: Child = {
    name,
    pid: child.pid,
    child,
    lines,
    lineCount: 0,
    expectedExit: false,
    exited,
    alive: () => !done,
    waitForLine: (pattern, timeoutMs) =>
      new Promise((resolve, reject) => {
        const seen = lines.map((l) => l.match(pattern)).find((m) => m !== null)
        if (seen) return resolve(seen)
        const finish = (error: Error | undefined, match?: RegExpMatchArray) => {
          clearTimeout(timer)
          listeners.delete(listener)
          if (error !== undefined) reject(error)
          else resolve(match!)
        }
        const timer = setTimeout(() => finish(new Error(`${name}: no line matching ${pattern} within ${timeoutMs} ms:\n${lines.join("\n")}`)), timeoutMs)
        const listener = (line: string) => {
          const match = line.match(pattern)
          if (match !== null) finish(undefined, match)
        }
        listeners.add(listener)
        void exited.then(({ code, signal }) => {
          if (listeners.has(listener)) finish(new Error(`${name}: exited (${code ?? signal}) first:\n${lines.join("\n")}`))
        })
      })
  }
  for (const stream of [child.stdout!, child.stderr!]) {
    createInterface({ input: stream }).on("line", (line) => {
      proc.lineCount++
      lines.push(line)
      if (lines.length > KEPT_LINES) lines.shift()
      for (const listener of listeners) listener(line)
    })
  }
  running.add(proc)
  return proc
}

export const signal = (pid: number, name: NodeJS.Signals): void => {
  try {
    process.kill(pid, name)
  } catch {
    // already gone
  }
}

/** Sends `how`; after `graceMs` without an exit, SIGKILL. Resolves with how it ended. */
export const stopChild = async (
  proc: Child,
  how: "SIGTERM" | "SIGKILL",
  graceMs: number
): Promise<{ code: number | null; signal: NodeJS.Signals | null; forced: boolean }> => {
  proc.expectedExit = true
  if (!proc.alive()) return { ...(await proc.exited), forced: false }
  signal(proc.pid, how)
  if (how === "SIGKILL") return { ...(await proc.exited), forced: false }
  const timeout = new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), graceMs).unref())
  const first = await Promise.race([proc.exited, timeout])
  if (first !== "timeout") return { ...first, forced: false }
  signal(proc.pid, "SIGKILL")
  return { ...(await proc.exited), forced: true }
}

/** For exit paths that cannot wait: SIGKILL to every child still running. */
export const killAllSync = (): void => {
  for (const proc of running) {
    proc.expectedExit = true
    signal(proc.pid, "SIGKILL")
  }
}

export const liveChildren = (): number => running.size
