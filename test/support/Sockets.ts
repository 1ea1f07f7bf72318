// The TCP connections a process tree holds, read from Linux's /proc: which connections nginx
// keeps open to an upstream port, so a test can tell a reused keep-alive connection from a new
// one by its local port. Linux only, as the rest of the end-to-end tests.
import { readdirSync, readFileSync, readlinkSync } from "node:fs"

/** Undefined when the file is gone (a process that exited between the listing and the read). */
const readOrUndefined = <A>(read: () => A): A | undefined => {
  try {
    return read()
  } catch {
    return undefined
  }
}

/** The pids whose parent is `pid`. */
export const childrenOf = (pid: number): Array<number> =>
  readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((child) => {
      const stat = readOrUndefined(() => readFileSync(`/proc/${child}/stat`, "utf8"))
      // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ")".
      return stat !== undefined && Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid
    })

/** The inodes of the sockets `pid` has open. */
const socketInodes = (pid: number): Array<string> =>
  (readOrUndefined(() => readdirSync(`/proc/${pid}/fd`)) ?? []).flatMap((fd) => {
    const target = readOrUndefined(() => readlinkSync(`/proc/${pid}/fd/${fd}`))
    const inode = target === undefined ? null : /^socket:\[(\d+)\]$/.exec(target)
    return inode === null ? [] : [inode[1]!]
  })

export interface Connection {
  readonly localPort: number
  readonly remoteAddress: string
  readonly remotePort: number
}

const ESTABLISHED = "01"

/** "0100007F:1F90" (little-endian IPv4, hex port) as an address and a port. */
const endpoint = (hex: string): { readonly address: string; readonly port: number } => {
  const [address, port] = hex.split(":") as [string, string]
  const bytes = address.match(/../g)!.map((byte) => parseInt(byte, 16)).reverse()
  return { address: bytes.join("."), port: parseInt(port, 16) }
}

/** The established IPv4 connections of `pid` and its children, as /proc/net/tcp lists them now. */
export const establishedConnections = (pid: number): Array<Connection> => {
  const inodes = new Set([pid, ...childrenOf(pid)].flatMap(socketInodes))
  return readFileSync("/proc/net/tcp", "utf8")
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields.length > 9 && fields[3] === ESTABLISHED && inodes.has(fields[9]!))
    .map((fields) => {
      const local = endpoint(fields[1]!)
      const remote = endpoint(fields[2]!)
      return { localPort: local.port, remoteAddress: remote.address, remotePort: remote.port }
    })
}
