// A real redis-server for tests and benchmarks: started on a free loopback port (never
// 6379), no persistence, stopped by its pid.
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { scaled } from "./Time.js"

export interface RedisServer {
  readonly port: number
  readonly url: string
  readonly pid: number
  readonly stop: () => Promise<void>
  /** For exit paths that cannot wait: kills the server by its pid. */
  readonly stopSync: () => void
}

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const ping = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    socket.once("connect", () => {
      socket.write("PING\r\n")
      socket.once("data", (data) => {
        socket.destroy()
        resolve(data.toString().startsWith("+PONG"))
      })
    })
    socket.once("error", () => resolve(false))
  })

const waitForPort = async (port: number, child: ChildProcess, nominalMs: number): Promise<void> => {
  const deadlineMs = scaled(nominalMs)
  const started = performance.now()
  for (;;) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`)
    if (await ping(port)) return
    if (performance.now() - started > deadlineMs) throw new Error("redis-server did not start")
    await new Promise((r) => setTimeout(r, 20)) // the poll's cadence
  }
}

export const startRedisServer = async (fixedPort?: number): Promise<RedisServer> => {
  const port = fixedPort ?? (await freePort())
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
