// The soak's child processes (spawned by test/support/Processes.ts, the last lines kept for a
// failure report): watched for exits nobody asked for, and stopped by pid on every way out
// (normal end, SIGINT/SIGTERM, an uncaught error, the hard time limit).
import { killPid, spawnProcess, type Exit, type Spawned } from "../../test/support/Processes.js"

const KEPT_LINES = 100

export interface Child extends Spawned {
  readonly name: string
  /** Set before the soak stops it, so the exit is not reported as unexpected. */
  expectedExit: boolean
}

const running = new Set<Child>()

/** Spawns `node args...`; `onUnexpectedExit` runs when it exits without `expectedExit` set. */
export const spawnNode = (
  name: string,
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  onUnexpectedExit: (child: Child, code: number | null, signal: NodeJS.Signals | null) => void
): Child => {
  const proc: Child = Object.assign(spawnProcess(process.execPath, args, { env }, { name, keptLines: KEPT_LINES }), { name, expectedExit: false })
  running.add(proc)
  void proc.exited.then(({ code, signal }) => {
    running.delete(proc)
    if (!proc.expectedExit) onUnexpectedExit(proc, code, signal)
  })
  return proc
}

/** Sends `how`; after `graceMs` without an exit, SIGKILL. Resolves with how it ended. */
export const stopChild = async (proc: Child, how: "SIGTERM" | "SIGKILL", graceMs: number): Promise<Exit & { forced: boolean }> => {
  proc.expectedExit = true
  if (!proc.alive()) return { ...(await proc.exited), forced: false }
  killPid(proc.pid, how)
  if (how === "SIGKILL") return { ...(await proc.exited), forced: false }
  const timeout = new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), graceMs).unref())
  const first = await Promise.race([proc.exited, timeout])
  if (first !== "timeout") return { ...first, forced: false }
  killPid(proc.pid, "SIGKILL")
  return { ...(await proc.exited), forced: true }
}

/** For exit paths that cannot wait: SIGKILL to every child still running. */
export const killAllSync = (): void => {
  for (const proc of running) {
    proc.expectedExit = true
    killPid(proc.pid, "SIGKILL")
  }
}
