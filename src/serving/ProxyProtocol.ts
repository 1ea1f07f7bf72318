// The PROXY protocol on a listener (the setting PINBOARD_PROXY_PROTOCOL, docs/config.md): every
// connection begins with a v1 (text) or v2 (binary) header, as AWS NLB, HAProxy and most TCP
// balancers send it (https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt), and the
// header's source address is the connection's client. A connection without a valid header,
// whole within the timeout, is destroyed without an answer.
import { isIP, type Server, type Socket, SocketAddress } from "node:net"
import { handOnWith, readOpening, takeConnections } from "./ConnectionTakeover.js"
import { plainAddress } from "./TrustedProxies.js"

/** Pure, incremental: what the bytes received so far say. */
export type ProxyHeaderParse =
  | { readonly _tag: "NeedMore" }
  | { readonly _tag: "Parsed"; readonly source: string | undefined; readonly length: number } // length: bytes the header took; source undefined for LOCAL/UNKNOWN
  | { readonly _tag: "Invalid"; readonly reason: string }

/** v1: the whole line, CRLF included, is at most 107 bytes. */
export const V1_MAX_BYTES = 107
/**
 * v2: what the header may announce after its fixed 16 bytes. The protocol allows 65535; the
 * addresses take at most 216 (AF_UNIX) and the TLVs balancers send (AWS's VPC endpoint id,
 * HAProxy's unique id, authority and TLS facts) a few hundred, so 4096 leaves room while an
 * unauthenticated connection holds at most 4 KiB, not 64, before its header is judged.
 */
export const V2_MAX_ADDRESS_BYTES = 4096

const NEED_MORE: ProxyHeaderParse = { _tag: "NeedMore" }
const invalid = (reason: string): ProxyHeaderParse => ({ _tag: "Invalid", reason })
const parsedHeader = (source: string | undefined, length: number): ProxyHeaderParse => ({ _tag: "Parsed", source, length })

const V1_SIGNATURE = Buffer.from("PROXY ", "latin1")
const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a])
const CR = 0x0d
const LF = 0x0a

/** Whether `received` and `signature` agree on the bytes both have. */
const agrees = (received: Buffer, signature: Buffer): boolean =>
  received.subarray(0, signature.length).equals(signature.subarray(0, Math.min(received.length, signature.length)))

/** One IPv6 address in its one canonical text (lowercase, the longest zero run as `::`), as sockets give them. */
const canonicalV6 = (address: string): string => plainAddress(new SocketAddress({ address, family: "ipv6" }).address)

/** The bytes a connection sent so far, from its first: a header, not yet one, or none (judged at the first byte that cannot belong to one). */
export const parseProxyHeader = (received: Buffer): ProxyHeaderParse => {
  if (received.length === 0) return NEED_MORE
  if (agrees(received, V1_SIGNATURE)) return received.length < V1_SIGNATURE.length ? NEED_MORE : parseV1(received)
  if (agrees(received, V2_SIGNATURE)) return received.length < 16 ? NEED_MORE : parseV2(received)
  return invalid("no PROXY protocol signature")
}

// v1 ------------------------------------------------------------------------------------------

// A decimal port without a sign, spaces or leading zeros.
const PORT = /^(0|[1-9][0-9]{0,4})$/
const isPort = (text: string): boolean => PORT.test(text) && Number(text) <= 65535

const parseV1 = (received: Buffer): ProxyHeaderParse => {
  const scanned = Math.min(received.length, V1_MAX_BYTES)
  for (let i = V1_SIGNATURE.length; i < scanned; i++) {
    const byte = received[i]!
    if (byte === CR) {
      if (i + 2 > V1_MAX_BYTES) return invalid(`v1 header longer than ${V1_MAX_BYTES} bytes`)
      if (i + 1 === received.length) return NEED_MORE
      if (received[i + 1] !== LF) return invalid("v1 header: CR without LF")
      return v1Line(received.toString("latin1", 0, i), i + 2)
    }
    if (byte < 0x20 || byte > 0x7e) return invalid("v1 header: a byte that is not printable ASCII")
  }
  return received.length >= V1_MAX_BYTES ? invalid(`v1 header: no CRLF within ${V1_MAX_BYTES} bytes`) : NEED_MORE
}

const v1Line = (line: string, length: number): ProxyHeaderParse => {
  const fields = line.split(" ")
  // "PROXY UNKNOWN" may be followed by anything up to the CRLF, which is ignored.
  if (fields[1] === "UNKNOWN") return parsedHeader(undefined, length)
  if (fields[1] !== "TCP4" && fields[1] !== "TCP6") return invalid(`v1 header: protocol ${JSON.stringify(fields[1])} is none of TCP4, TCP6, UNKNOWN`)
  if (fields.length !== 6) return invalid("v1 header: not `PROXY TCPn source destination sport dport` with single spaces")
  const [, protocol, source, destination, sourcePort, destinationPort] = fields as [string, string, string, string, string, string]
  const family = protocol === "TCP4" ? 4 : 6
  // isIP takes a zone (`fe80::1%eth0`), which no balancer sends for a remote peer.
  for (const address of [source, destination])
    if (isIP(address) !== family || address.includes("%")) return invalid(`v1 header: ${JSON.stringify(address)} is no IPv${family} address`)
  for (const port of [sourcePort, destinationPort]) if (!isPort(port)) return invalid(`v1 header: ${JSON.stringify(port)} is no port`)
  return parsedHeader(family === 4 ? source : canonicalV6(source), length)
}

// v2 ------------------------------------------------------------------------------------------

const AF_UNSPEC = 0x0
const AF_INET = 0x1
const AF_INET6 = 0x2
const AF_UNIX = 0x3
/** Bytes the addresses take, by family. */
const ADDRESS_BYTES: Record<number, number> = { [AF_UNSPEC]: 0, [AF_INET]: 12, [AF_INET6]: 36, [AF_UNIX]: 216 }

const parseV2 = (received: Buffer): ProxyHeaderParse => {
  const versionCommand = received[12]!
  if (versionCommand >> 4 !== 2) return invalid(`v2 header: version ${versionCommand >> 4}, not 2`)
  const command = versionCommand & 0x0f
  if (command !== 0x0 && command !== 0x1) return invalid(`v2 header: command ${command} is neither LOCAL (0) nor PROXY (1)`)
  const familyTransport = received[13]!
  const family = familyTransport >> 4
  const transport = familyTransport & 0x0f
  const addressLength = received.readUInt16BE(14)
  if (addressLength > V2_MAX_ADDRESS_BYTES) return invalid(`v2 header: ${addressLength} bytes of addresses and TLVs, more than ${V2_MAX_ADDRESS_BYTES}`)
  // LOCAL (a balancer's health check): the family and addresses are ignored.
  const local = command === 0x0
  if (!local) {
    const needed = ADDRESS_BYTES[family]
    if (needed === undefined || transport > 0x2) return invalid(`v2 header: unknown family and transport 0x${familyTransport.toString(16).padStart(2, "0")}`)
    if (addressLength < needed) return invalid(`v2 header: ${addressLength} bytes cannot hold the addresses of family ${family}`)
  }
  const length = 16 + addressLength
  if (received.length < length) return NEED_MORE
  if (local) return parsedHeader(undefined, length)
  switch (family) {
    case AF_INET:
      return parsedHeader(received.subarray(16, 20).join("."), length)
    case AF_INET6: {
      const groups: Array<string> = []
      for (let at = 16; at < 32; at += 2) groups.push(received.readUInt16BE(at).toString(16))
      return parsedHeader(canonicalV6(groups.join(":")), length)
    }
    default:
      // AF_UNSPEC and AF_UNIX: no address of the client's to give; the socket's own peer stands.
      return parsedHeader(undefined, length)
  }
}

// The listener ---------------------------------------------------------------------------------

/**
 * The header's source, kept on the socket itself: an HTTP/2 request's `socket` is node:http2's
 * proxy of the connection's socket, which passes such a property through (a WeakMap keyed by
 * the socket would not know the proxy).
 */
const PEER = Symbol("pinboard.proxiedPeer")
type MarkedSocket = Socket & { [PEER]?: string; readonly _parent?: MarkedSocket | null }

const accepting = new WeakSet<Server>()

/** The client's address a PROXY header gave for this socket, or undefined (no header read, or LOCAL/UNKNOWN). */
export const proxiedPeer = (socket: Socket): string | undefined => {
  // Over TLS the request's socket is the TLSSocket, made on top of the TCP socket the header came on.
  const marked = socket as MarkedSocket
  return marked[PEER] ?? marked._parent?.[PEER]
}

/**
 * Makes `server` (a node:http Server, before or after listen) read a PROXY header off each new
 * connection before HTTP sees it: the header's source is recorded for `proxiedPeer`, the bytes
 * after the header are given back to the socket, then the server's own 'connection' listeners
 * run. A connection without a valid header within timeoutMs is destroyed without an answer.
 * Install it after every other 'connection' listener: one added later sees the socket before
 * its header is read.
 */
export const acceptProxyProtocol = (server: Server, options: { readonly timeoutMs: number }): void => {
  if (accepting.has(server)) throw new Error("acceptProxyProtocol: this server already reads PROXY headers")
  accepting.add(server)
  takeConnections(server, "connection", (socket: Socket, toServer) => readHeader(socket, options.timeoutMs, toServer))
}

// Nothing is written: a client that sent no header learns nothing of what listens here.
const readHeader = (socket: Socket, timeoutMs: number, handOver: () => void): void =>
  readOpening(socket, timeoutMs, (received) => {
    const header = parseProxyHeader(received)
    switch (header._tag) {
      case "NeedMore":
        return undefined
      case "Invalid":
        return () => socket.destroy()
      default:
        return () => {
          if (header.source !== undefined) (socket as MarkedSocket)[PEER] = header.source
          handOnWith(socket, received.subarray(header.length), handOver)
        }
    }
  })
