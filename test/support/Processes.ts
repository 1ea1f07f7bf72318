// Real processes for end-to-end tests (and the benchmarks and reliability runs): spawn one,
// wait for a port or a line of its output, and stop it (or anything it started) by pid.
import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process"
import net from "node:net"
import { createInterface } from "node:readline"
import { scaled } from "./Time.js"

export { freePort } from "./Ports.js"

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface Spawned {
  readonly child: ChildProcess
  readonly pid: number
  /** The lines printed so far (the last `keptLines` of them), stdout and stderr interleaved. */
  readonly lines: ReadonlyArray<string>
  /** How many lines were printed, the dropped ones included. */
  readonly lineCount: number
  /** Calls `listener` with every line printed from now on. */
  readonly onLine: (listener: (line: string) => void) => void
  /** Resolves with the first line (already kept or still to come) matching `pattern`; fails after `timeoutMs` (nominal, scaled). */
  readonly waitForLine: (pattern: RegExp, timeoutMs: number) => Promise<RegExpMatchArray>
  readonly exited: Promise<Exit>
  /** How it exited; undefined while it runs. */
  readonly exit: Exit | undefined
  readonly alive: () => boolean
  /** SIGKILL unless it has already exited; resolves once it has. */
  readonly kill: () => Promise<Exit>
}

export interface SpawnExtras {
  /** Names the process in errors. */
  readonly name?: string
  /** Keep only the last this many lines (a long run must not hold every line); default all. */
  readonly keptLines?: number
}

/** The cadence of the polls below (not a bound). */
const pollPause = () => new Promise((resolve) => setTimeout(resolve, 20))

/** Spawns `command`, reads its output line by line; shared by the tests, the benchmarks and the reliability runs. */
export const spawnProcess = (command: string, args: ReadonlyArray<string>, options: SpawnOptions = {}, extras: SpawnExtras = {}): Spawned => {
  const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] })
  const who = extras.name ?? command
  if (child.pid === undefined) throw new Error(`could not spawn ${who}`)
  const kept = extras.keptLines ?? Infinity
  const lines: Array<string> = []
  let lineCount = 0
  const listeners = new Set<(line: string) => void>()
  for (const stream of [child.stdout!, child.stderr!]) {
    createInterface({ input: stream }).on("line", (line) => {
      lineCount++
      lines.push(line)
      if (lines.length > kept) lines.shift()
      for (const listener of listeners) listener(line)
    })
  }
  let exit: Exit | undefined
  const exited = new Promise<Exit>((resolve) =>
    child.once("exit", (code, signal) => {
      exit = { code, signal }
      resolve(exit)
    })
  )

  const waitForLine = (pattern: RegExp, nominalMs: number) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const timeoutMs = scaled(nominalMs)
      const seen = lines.map((line) => line.match(pattern)).find((m) => m !== null)
      if (seen) return resolve(seen)
      const done = () => {
        clearTimeout(timer)
        listeners.delete(onLine)
      }
      const onLine = (line: string) => {
        const match = line.match(pattern)
        if (match) {
          done()
          resolve(match)
        }
      }
      const timer = setTimeout(() => {
        done()
        reject(new Error(`${who}: no line matching ${pattern} within ${timeoutMs} ms; output so far:\n${lines.join("\n")}`))
      }, timeoutMs)
      listeners.add(onLine)
      void exited.then((e) => {
        if (!listeners.has(onLine)) return
        done()
        reject(new Error(`${who}: exited (${e.signal ?? `code ${e.code}`}) before a line matching ${pattern}; output:\n${lines.join("\n")}`))
      })
    })

  const kill = async () => {
    if (exit === undefined) killPid(child.pid!, "SIGKILL")
    return exited
  }

  return {
    child,
    pid: child.pid,
    lines,
    get lineCount() {
      return lineCount
    },
    onLine: (listener) => void listeners.add(listener),
    waitForLine,
    exited,
    get exit() {
      return exit
    },
    alive: () => exit === undefined,
    kill
  }
}

/** Sends a signal; a process that is already gone is not an error. */
export const killPid = (pid: number, signal: NodeJS.Signals = "SIGKILL"): void => {
  try {
    process.kill(pid, signal)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error
  }
}

export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Polls until the pid is gone; false if it is still there after `timeoutMs` (nominal, scaled). */
export const waitForPidGone = async (pid: number, timeoutMs: number): Promise<boolean> => {
  const deadline = performance.now() + scaled(timeoutMs)
  while (isAlive(pid)) {
    if (performance.now() > deadline) return false
    await pollPause()
  }
  return true
}

/** Polls until something accepts TCP connections on the loopback port; fails after `nominalMs` (scaled). */
export const waitForPort = async (port: number, nominalMs: number, host = "127.0.0.1"): Promise<void> => {
  const timeoutMs = scaled(nominalMs)
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, host)
      socket.once("connect", () => {
        socket.destroy()
        resolve(true)
      })
      socket.once("error", () => resolve(false))
    })
    if (open) return
    if (performance.now() > deadline) throw new Error(`nothing listening on ${host}:${port} within ${timeoutMs} ms`)
    await pollPause()
  }
}
