// Pinboard's V8 heap, read through the inspector: Pinboard runs with `--inspect=127.0.0.1:<port>`
// and the soak asks `Runtime.getHeapUsage` over the DevTools protocol (no GC forced, nothing
// enabled, so the process under test runs as it would).
import WebSocket from "ws"

export interface HeapUsage {
  readonly used: number
  readonly total: number
}

export class HeapProbe {
  private nextId = 1
  private readonly pending = new Map<number, (result: unknown) => void>()

  private constructor(private readonly socket: WebSocket) {
    socket.on("message", (data) => {
      const message = JSON.parse(String(data)) as { id?: number; result?: unknown }
      if (message.id === undefined) return
      this.pending.get(message.id)?.(message.result)
      this.pending.delete(message.id)
    })
    socket.on("close", () => {
      for (const resolve of this.pending.values()) resolve(undefined)
      this.pending.clear()
    })
  }

  /** Connects to the inspector on `port`; undefined when it cannot be reached within `timeoutMs`. */
  static async connect(port: number, timeoutMs = 10_000): Promise<HeapProbe | undefined> {
    const deadline = performance.now() + timeoutMs
    for (;;) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/json/list`, { signal: AbortSignal.timeout(1000) })
        const [target] = (await res.json()) as Array<{ webSocketDebuggerUrl?: string }>
        if (target?.webSocketDebuggerUrl !== undefined) {
          const socket = new WebSocket(target.webSocketDebuggerUrl)
          await new Promise<void>((resolve, reject) => {
            socket.once("open", resolve)
            socket.once("error", reject)
          })
          socket.on("error", () => undefined)
          return new HeapProbe(socket)
        }
      } catch {
        // not listening yet
      }
      if (performance.now() > deadline) return undefined
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  }

  /** Heap in use and heap size, in bytes; undefined when the inspector does not answer within 2 s. */
  usage(): Promise<HeapUsage | undefined> {
    if (this.socket.readyState !== WebSocket.OPEN) return Promise.resolve(undefined)
    const id = this.nextId++
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id)
        resolve(undefined)
      }, 2000)
      this.pending.set(id, (result) => {
        clearTimeout(timer)
        const r = result as { usedSize?: number; totalSize?: number } | undefined
        resolve(r?.usedSize === undefined || r.totalSize === undefined ? undefined : { used: r.usedSize, total: r.totalSize })
      })
      this.socket.send(JSON.stringify({ id, method: "Runtime.getHeapUsage" }))
    })
  }

  close(): void {
    this.socket.terminate()
  }
}
