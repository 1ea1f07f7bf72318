// A real redis-server for tests: started on a free loopback port, stopped by its pid.
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface RedisServer {
  readonly port: number
  readonly url: string
  readonly pid: number
  readonly stop: () => Promise<void>
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

const waitForPort = async (port: number, child: ChildProcess, deadlineMs: number): Promise<void> => {
  const started = performance.now()
  for (;;) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`)
    const ok = await new Promise<boolean>((resolve) => {
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
    if (ok) return
    if (performance.now() - started > deadlineMs) throw new Error("redis-server did not start")
    await new Promise((r) => setTimeout(r, 20))
  }
}

export const startRedisServer = async (port?: number): Promise<RedisServer> => {
  const chosen = port ?? (await freePort())
  if (chosen === 6379) throw new Error("tests never use port 6379")
  const dir = mkdtempSync(join(tmpdir(), "pinboard-redis-"))
  const child = spawn(
    "redis-server",
    ["--port", String(chosen), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning"],
    { stdio: "ignore" }
  )
  await waitForPort(chosen, child, 10_000)
  const pid = child.pid!
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve()
      child.once("exit", () => {
        rmSync(dir, { recursive: true, force: true })
        resolve()
      })
      process.kill(pid, "SIGKILL")
    })
  return { port: chosen, url: `redis://127.0.0.1:${chosen}`, pid, stop }
}
