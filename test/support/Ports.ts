// Free loopback ports for the servers tests start. A port handed out by the kernel
// (`listen(0)`) lies in the ephemeral range, where, once released, any outgoing connection
// of the busy test run may take it as its local port before the server binds it. So the
// ports come from below that range, at random, each checked by binding it once; never 6379
// or 16379 (this machine's own Redis).
import { readFileSync } from "node:fs"
import net from "node:net"

const lowest = 20_000

/** The first port of the kernel's ephemeral range (32768 when it cannot be read). */
const ephemeralStart = (): number => {
  try {
    const first = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0])
    return Number.isInteger(first) && first > lowest + 1_000 ? first : 32_768
  } catch {
    return 32_768
  }
}

const below = ephemeralStart()
/** Handed out by this process already: a port is not handed out twice while it may still be starting. */
const handedOut = new Set<number>()

const bindsNow = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = net.createServer()
    server.unref()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

export const freePort = async (): Promise<number> => {
  for (;;) {
    const port = lowest + Math.floor(Math.random() * (below - lowest))
    if (port === 6379 || port === 16379 || handedOut.has(port)) continue
    if (await bindsNow(port)) {
      handedOut.add(port)
      return port
    }
  }
}
