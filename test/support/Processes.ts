// Real processes for end-to-end tests: spawn one, wait for a port or a line of its output,
// and stop it (or anything it started) by pid.
import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process"
import net from "node:net"
import { createInterface } from "node:readline"

export { freePort } from "./RedisServer.js"

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface Spawned {
  readonly child: ChildProcess
  readonly pid: number
  /** Every line printed so far, stdout and stderr interleaved. */
  readonly lines: ReadonlyArray<string>
  /** Resolves with the first line (already printed or still to come) matching `pattern`. */
  readonly waitForLine: (pattern: RegExp, timeoutMs: number) => Promise<RegExpMatchArray>
  readonly exited: Promise<Exit>
  /** SIGKILL unless it has already exited; resolves once it has. */
  readonly kill: () => Promise<Exit>
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export const spawnProcess = (command: string, args: ReadonlyArray<string>, options: SpawnOptions = {}): Spawned => {
  const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] })
  if (child.pid === undefined) throw new Error(`could not spawn ${command}`)
  const lines: Array<string> = []
  const waiters = new Set<(line: string) => void>()
  for (const stream of [child.stdout!, child.stderr!]) {
    createInterface({ input: stream }).on("line", (line) => {
      lines.push(line)
      for (const waiter of waiters) waiter(line)
    })
  }
  const exited = new Promise<Exit>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })))
  let exit: Exit | undefined
  void exited.then((e) => (exit = e))

  const waitForLine = (pattern: RegExp, timeoutMs: number) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const seen = lines.map((line) => line.match(pattern)).find((m) => m !== null)
      if (seen) return resolve(seen)
      const done = () => {
        clearTimeout(timer)
        waiters.delete(onLine)
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
        reject(new Error(`no line matching ${pattern} within ${timeoutMs} ms; output so far:\n${lines.join("\n")}`))
      }, timeoutMs)
      waiters.add(onLine)
      void exited.then((e) => {
        if (!waiters.has(onLine)) return
        done()
        reject(new Error(`exited (${e.signal ?? `code ${e.code}`}) before a line matching ${pattern}; output:\n${lines.join("\n")}`))
      })
    })

  const kill = async () => {
    if (exit === undefined) killPid(child.pid!, "SIGKILL")
    return exited
  }

  return { child, pid: child.pid, lines, waitForLine, exited, kill }
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

/** Polls until the pid is gone; false if it is still there after `timeoutMs`. */
export const waitForPidGone = async (pid: number, timeoutMs: number): Promise<boolean> => {
  const deadline = performance.now() + timeoutMs
  while (isAlive(pid)) {
    if (performance.now() > deadline) return false
    await sleep(20)
  }
  return true
}

/** Polls until something accepts TCP connections on the loopback port. */
export const waitForPort = async (port: number, timeoutMs: number, host = "127.0.0.1"): Promise<void> => {
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
    await sleep(20)
  }
}
