// A real redis-server for tests and benchmarks: started on a free loopback port (never
// 6379), no persistence, stopped by its pid.
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePort } from "./Ports.js"
import { scaled } from "./Time.js"

export interface RedisServer {
  readonly port: number
  readonly url: string
  readonly pid: number
  readonly stop: () => Promise<void>
  /** For exit paths that cannot wait: kills the server by its pid. */
  readonly stopSync: () => void
}

/** The process_id of the redis-server answering on `port`, or undefined while none answers. */
const servedBy = (port: number): Promise<number | undefined> =>
  new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    let answer = ""
    socket.once("connect", () => socket.write("INFO server\r\n"))
    socket.on("data", (data) => {
      answer += data.toString()
      const pid = /^process_id:(\d+)\r?$/m.exec(answer)
      if (pid !== null) {
        socket.destroy()
        resolve(Number(pid[1]))
      }
    })
    socket.once("error", () => resolve(undefined))
    socket.once("close", () => resolve(undefined))
    // Something else on the port may answer otherwise, or not at all: the poll asks again.
    socket.setTimeout(1000, () => socket.destroy())
  })

class PortTaken extends Error {}

const waitForPort = async (port: number, child: ChildProcess, nominalMs: number): Promise<void> => {
  const deadlineMs = scaled(nominalMs)
  const started = performance.now()
  for (;;) {
    if (child.exitCode !== null) throw new PortTaken(`redis-server exited with ${child.exitCode} (is ${port} taken?)`)
    const pid = await servedBy(port)
    if (pid === child.pid) return
    if (pid !== undefined) throw new PortTaken(`another redis-server answers on ${port}`)
    if (performance.now() - started > deadlineMs) throw new Error("redis-server did not start")
    await new Promise((r) => setTimeout(r, 20)) // the poll's cadence
  }
}

/**
 * Starts redis-server on `fixedPort`, or on a free port: should another process take that port
 * between the check and the bind, it starts again on another.
 */
export const startRedisServer = async (fixedPort?: number): Promise<RedisServer> => {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOn(fixedPort ?? (await freePort()))
    } catch (error) {
      if (!(error instanceof PortTaken) || fixedPort !== undefined || attempt === 5) throw error
    }
  }
}

const startOn = async (port: number): Promise<RedisServer> => {
  if (port === 6379) throw new Error("never port 6379: this machine's own Redis runs there")
  const dir = mkdtempSync(join(tmpdir(), "pinboard-redis-"))
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning"],
    { stdio: "ignore" }
  )
  child.on("error", () => {
    // spawn failures show as a missing pid or an early exit below
  })
  const pid = child.pid
  const exited = () => child.exitCode !== null || child.signalCode !== null
  const stopSync = () => {
    if (pid !== undefined && !exited()) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    if (pid === undefined) throw new Error("redis-server did not spawn (is it on PATH?)")
    await waitForPort(port, child, 10_000)
  } catch (error) {
    stopSync()
    throw error
  }
  const stop = () =>
    new Promise<void>((resolve) => {
      if (exited()) {
        rmSync(dir, { recursive: true, force: true })
        return resolve()
      }
      child.once("exit", () => {
        rmSync(dir, { recursive: true, force: true })
        resolve()
      })
      process.kill(pid, "SIGKILL")
    })
  return { port, url: `redis://127.0.0.1:${port}`, pid, stop, stopSync }
}
