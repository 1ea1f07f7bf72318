// A TCP link the chaos run can cut: a worker's registry calls go through one, so "heartbeats
// dropped" is a cut link while the worker keeps serving; a Pinboard's registry Redis
// connection goes through one, so "Pinboard cut from Redis" is a cut link while its clients
// stay connected. A cut comes in two forms:
// - reset: new connections are refused and the open ones reset until the cut heals;
// - stall (a black hole, as a partition without resets looks to TCP): connections stay open
//   and new ones are taken, but no byte passes either way; at the heal the held bytes are
//   delivered in order, as TCP's retransmissions would.
import net from "node:net"

export interface Link {
  readonly port: number
  readonly cut: (ms: number) => void
  readonly stall: (ms: number) => void
  readonly close: () => void
}

export const openLink = (targetPort: () => number): Promise<Link> =>
  new Promise((resolve) => {
    let cutUntil = 0
    let stalledUntil = 0
    let flushTimer: NodeJS.Timeout | undefined
    const open = new Set<net.Socket>()
    /** Bytes that arrived during a stall, in arrival order over every connection. */
    const held: Array<{ readonly to: net.Socket; readonly chunk: Buffer }> = []

    const flush = () => {
      flushTimer = undefined
      const left = stalledUntil - Date.now()
      if (left > 0) return void (flushTimer = setTimeout(flush, left))
      for (const { to, chunk } of held.splice(0)) if (!to.destroyed) to.write(chunk)
    }
    const relay = (from: net.Socket, to: net.Socket) =>
      from.on("data", (chunk: Buffer) => {
        if (Date.now() < stalledUntil || held.length > 0) held.push({ to, chunk })
        else to.write(chunk)
      })

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
      relay(client, upstream)
      relay(upstream, client)
    })
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as net.AddressInfo).port,
        cut: (ms) => {
          cutUntil = Math.max(cutUntil, Date.now() + ms)
          for (const socket of open) socket.destroy()
        },
        stall: (ms) => {
          stalledUntil = Math.max(stalledUntil, Date.now() + ms)
          if (flushTimer === undefined) flushTimer = setTimeout(flush, ms)
        },
        close: () => {
          if (flushTimer !== undefined) clearTimeout(flushTimer)
          server.close()
          for (const socket of open) socket.destroy()
        }
      })
    )
  })
