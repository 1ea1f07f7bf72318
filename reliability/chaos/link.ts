// A TCP link the chaos run can cut: a worker's registry calls go through one, so "heartbeats
// dropped" is a cut link while the worker keeps serving. Cutting refuses new connections and
// resets the open ones until the cut heals.
import net from "node:net"

export interface Link {
  readonly port: number
  readonly cut: (ms: number) => void
  readonly close: () => void
}

export const openLink = (targetPort: () => number): Promise<Link> =>
  new Promise((resolve) => {
    let cutUntil = 0
    const open = new Set<net.Socket>()
    const server = net.createServer((client) => {
      if (Date.now() < cutUntil) return void client.destroy()
      const upstream = net.connect(targetPort(), "127.0.0.1")
      for (const socket of [client, upstream]) {
        open.add(socket)
        socket.on("error", () => undefined)
        socket.on("close", () => {
          open.delete(socket)
          client.destroy()
          upstream.destroy()
        })
      }
      client.pipe(upstream)
      upstream.pipe(client)
    })
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as net.AddressInfo).port,
        cut: (ms) => {
          cutUntil = Math.max(cutUntil, Date.now() + ms)
          for (const socket of open) socket.destroy()
        },
        close: () => {
          server.close()
          for (const socket of open) socket.destroy()
        }
      })
    )
  })
