// The PROXY protocol on a listener (src/serving/ProxyProtocol.ts; the protocol:
// https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt): the parser on its own, every
// header form and the malformed ones, then a real node:http server reading headers off raw
// connections, whole or split, followed by requests, bodies and a WebSocket upgrade.
import { once } from "node:events"
import http, { type IncomingMessage } from "node:http"
import net, { type AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { WebSocket, WebSocketServer } from "ws"
import { acceptProxyProtocol, parseProxyHeader, proxiedPeer, type ProxyHeaderParse } from "../../src/serving/ProxyProtocol.js"
import { poll, scaled, within } from "../support/Time.js"
import * as fc from "../support/Arbitraries.js"
import { rawExchange } from "../support/Wire.js"

// ---- Headers, built byte by byte from the protocol's text -----------------------------------

const V2_SIGNATURE = Buffer.from("\r\n\r\n\0\r\nQUIT\n", "latin1")
const LOCAL = 0x20
const PROXY = 0x21
const TCP4 = 0x11
const TCP6 = 0x21
const UNSPEC = 0x00
const UNIX_STREAM = 0x31

const v1 = (line: string): Buffer => Buffer.from(line, "latin1")

const v2 = (versionCommand: number, familyTransport: number, body: Buffer): Buffer => {
  const head = Buffer.alloc(16)
  V2_SIGNATURE.copy(head)
  head[12] = versionCommand
  head[13] = familyTransport
  head.writeUInt16BE(body.length, 14)
  return Buffer.concat([head, body])
}

const port16 = (port: number) => Buffer.of(port >> 8, port & 0xff)
const inet = (source: ReadonlyArray<number>, destination: ReadonlyArray<number>, sourcePort = 56324, destinationPort = 443) =>
  Buffer.concat([Buffer.from(source), Buffer.from(destination), port16(sourcePort), port16(destinationPort)])
const inet6 = (source: Buffer, destination: Buffer, sourcePort = 56324, destinationPort = 443) =>
  Buffer.concat([source, destination, port16(sourcePort), port16(destinationPort)])
/** 16 bytes from eight groups. */
const v6 = (...groups: Array<number>) => Buffer.concat(groups.map(port16))
const tlv = (type: number, value: Buffer) => Buffer.concat([Buffer.of(type), port16(value.length), value])

const parsed = (source: string | undefined, length: number): ProxyHeaderParse => ({ _tag: "Parsed", source, length })
const NEED_MORE: ProxyHeaderParse = { _tag: "NeedMore" }
const tagOf = (bytes: Buffer) => parseProxyHeader(bytes)._tag

/** Every strict prefix of `header` asks for more; `header` itself, then any bytes, gives `source` and its length. */
const expectHeader = (header: Buffer, source: string | undefined, after: Buffer = Buffer.from("GET / HTTP/1.1\r\n")) => {
  for (let length = 0; length < header.length; length++) expect(parseProxyHeader(header.subarray(0, length)), `prefix of ${length}`).toEqual(NEED_MORE)
  expect(parseProxyHeader(header)).toEqual(parsed(source, header.length))
  expect(parseProxyHeader(Buffer.concat([header, after]))).toEqual(parsed(source, header.length))
}

const expectInvalid = (bytes: Buffer, reason?: RegExp) => {
  const result = parseProxyHeader(bytes)
  expect(result._tag, JSON.stringify(bytes.toString("latin1"))).toBe("Invalid")
  if (reason !== undefined && result._tag === "Invalid") expect(result.reason).toMatch(reason)
}

describe("parseProxyHeader: v1", () => {
  it("TCP4 gives the source address and the header's length", () => {
    expectHeader(v1("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n"), "192.0.2.1")
    expectHeader(v1("PROXY TCP4 0.0.0.0 255.255.255.255 0 65535\r\n"), "0.0.0.0")
  })

  it("TCP6 gives the source in its canonical text; an IPv4-mapped source comes out as IPv4", () => {
    expectHeader(v1("PROXY TCP6 2001:db8::1 2001:db8::2 56324 443\r\n"), "2001:db8::1")
    expectHeader(v1("PROXY TCP6 2001:DB8:0:0:0:0:0:1 ::1 56324 443\r\n"), "2001:db8::1")
    expectHeader(v1("PROXY TCP6 ::ffff:192.0.2.1 ::ffff:198.51.100.2 56324 443\r\n"), "192.0.2.1")
    expectHeader(v1("PROXY TCP6 0:0:0:0:0:ffff:c000:201 ::1 1 2\r\n"), "192.0.2.1")
  })

  it("UNKNOWN is accepted without a source, whatever follows it on the line", () => {
    expectHeader(v1("PROXY UNKNOWN\r\n"), undefined)
    expectHeader(v1("PROXY UNKNOWN 2001:db8::1 2001:db8::2 56324 443\r\n"), undefined)
  })

  it("the longest header the protocol allows, 107 bytes, is read; one byte more is not", () => {
    const longest = v1(`PROXY UNKNOWN ${"ffff:".repeat(7)}ffff ${"ffff:".repeat(7)}ffff 65535 65535\r\n`)
    expect(longest.length).toBe(107)
    expectHeader(longest, undefined)
    const tooLong = v1(`PROXY UNKNOWN ${"ffff:".repeat(7)}ffff ${"ffff:".repeat(7)}ffff 65535 655350\r\n`)
    expect(tagOf(tooLong.subarray(0, 106))).toBe("NeedMore")
    expectInvalid(tooLong.subarray(0, 107), /107/)
    expectInvalid(tooLong, /107/)
  })

  it("no CRLF within 107 bytes is invalid at the 107th byte, not a wait for more", () => {
    const line = v1(`PROXY TCP4 ${"1".repeat(200)}`)
    expect(tagOf(line.subarray(0, 106))).toBe("NeedMore")
    expectInvalid(line.subarray(0, 107), /107/)
    expectInvalid(line)
  })

  it("a source or destination that is not the protocol's family is invalid", () => {
    for (const line of [
      "PROXY TCP4 2001:db8::1 192.0.2.2 1 2\r\n",
      "PROXY TCP4 192.0.2.1 2001:db8::2 1 2\r\n",
      "PROXY TCP6 192.0.2.1 2001:db8::2 1 2\r\n",
      "PROXY TCP6 2001:db8::1 198.51.100.2 1 2\r\n",
      "PROXY TCP4 192.0.2.256 192.0.2.2 1 2\r\n",
      "PROXY TCP4 192.0.2 192.0.2.2 1 2\r\n",
      "PROXY TCP4 01.0.2.1 192.0.2.2 1 2\r\n",
      "PROXY TCP4 localhost 192.0.2.2 1 2\r\n",
      "PROXY TCP6 fe80::1%eth0 2001:db8::2 1 2\r\n",
      "PROXY TCP6 2001:db8::g 2001:db8::2 1 2\r\n"
    ])
      expectInvalid(v1(line), /address/)
  })

  it("a port out of 0-65535, signed, padded or not decimal is invalid", () => {
    for (const [sourcePort, destinationPort] of [["65536", "443"], ["1", "99999"], ["-1", "443"], ["+80", "443"], ["080", "443"], ["0x50", "443"], ["8o", "443"], ["1", "443 "], ["", "443"]])
      expectInvalid(v1(`PROXY TCP4 192.0.2.1 198.51.100.2 ${sourcePort} ${destinationPort}\r\n`), /port|spaces/)
  })

  it("other protocols, missing or extra fields and double spaces are invalid", () => {
    for (const line of [
      "PROXY TCP5 192.0.2.1 198.51.100.2 1 2\r\n",
      "PROXY UDP4 192.0.2.1 198.51.100.2 1 2\r\n",
      "PROXY tcp4 192.0.2.1 198.51.100.2 1 2\r\n",
      "PROXY \r\n",
      "PROXY TCP4 192.0.2.1 198.51.100.2 1\r\n",
      "PROXY TCP4 192.0.2.1 198.51.100.2 1 2 3\r\n",
      "PROXY TCP4  192.0.2.1 198.51.100.2 1 2\r\n",
      "PROXY  TCP4 192.0.2.1 198.51.100.2 1 2\r\n"
    ])
      expectInvalid(v1(line))
  })

  it("a bare LF, a CR without LF or a byte that is not printable ASCII is invalid as soon as it arrives", () => {
    expectInvalid(v1("PROXY TCP4 192.0.2.1 198.51.100.2 1 2\n"))
    expectInvalid(v1("PROXY TCP4 192.0.2.1 198.51.100.2 1 2\rX"))
    expectInvalid(v1("PROXY TCP4 192.0.2.1\t"))
    expectInvalid(Buffer.concat([v1("PROXY TCP4 192.0.2."), Buffer.of(0xc3, 0xa9)]))
    expectInvalid(v1("PROXY TCP4 192.0.2.1\0"))
  })
})

describe("parseProxyHeader: v2", () => {
  it("PROXY over IPv4 gives the source address and the header's length", () => {
    expectHeader(v2(PROXY, TCP4, inet([192, 0, 2, 1], [198, 51, 100, 2])), "192.0.2.1")
    expectHeader(v2(PROXY, TCP4, inet([0, 0, 0, 0], [255, 255, 255, 255], 0, 65535)), "0.0.0.0")
  })

  it("PROXY over IPv6 gives the source in its canonical text; IPv4-mapped comes out as IPv4", () => {
    expectHeader(v2(PROXY, TCP6, inet6(v6(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), v6(0, 0, 0, 0, 0, 0, 0, 1))), "2001:db8::1")
    expectHeader(v2(PROXY, TCP6, inet6(v6(0x2001, 0xdb8, 0, 0, 1, 0, 0, 1), v6(0, 0, 0, 0, 0, 0, 0, 1))), "2001:db8::1:0:0:1")
    expectHeader(v2(PROXY, TCP6, inet6(v6(0xfe80, 0, 0, 0, 0xabcd, 0xef, 0x1, 0xff00), v6(0, 0, 0, 0, 0, 0, 0, 1))), "fe80::abcd:ef:1:ff00")
    expectHeader(v2(PROXY, TCP6, inet6(v6(0, 0, 0, 0, 0, 0xffff, 0xc000, 0x0201), v6(0, 0, 0, 0, 0, 0, 0, 1))), "192.0.2.1")
  })

  it("TLVs after the addresses are skipped: the length covers them, the source is the same", () => {
    const aws = tlv(0xea, Buffer.concat([Buffer.of(0x01), Buffer.from("vpce-08d2bf15fac5001c9", "latin1")]))
    const authority = tlv(0x02, Buffer.from("pinboard.example", "latin1"))
    const noop = tlv(0x04, Buffer.alloc(7))
    const header = v2(PROXY, TCP4, Buffer.concat([inet([203, 0, 113, 7], [10, 0, 0, 1]), aws, authority, noop]))
    expect(header.length).toBe(16 + 12 + aws.length + authority.length + noop.length)
    expectHeader(header, "203.0.113.7")
    expectHeader(v2(PROXY, TCP6, Buffer.concat([inet6(v6(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7), v6(0, 0, 0, 0, 0, 0, 0, 1)), aws])), "2001:db8::7")
  })

  it("LOCAL (a balancer's health check) is accepted without a source, whatever its family and addresses", () => {
    expectHeader(v2(LOCAL, UNSPEC, Buffer.alloc(0)), undefined)
    expectHeader(v2(LOCAL, TCP4, inet([192, 0, 2, 1], [198, 51, 100, 2])), undefined)
    expectHeader(v2(LOCAL, 0xff, Buffer.alloc(3)), undefined)
  })

  it("PROXY over AF_UNSPEC or AF_UNIX is accepted without a source", () => {
    expectHeader(v2(PROXY, UNSPEC, Buffer.alloc(0)), undefined)
    expectHeader(v2(PROXY, UNIX_STREAM, Buffer.alloc(216)), undefined)
  })

  it("a version other than 2, or a command other than LOCAL and PROXY, is invalid once its byte arrives", () => {
    for (const versionCommand of [0x11, 0x31, 0x01, 0xf1, 0x22, 0x2f]) {
      const header = v2(versionCommand, TCP4, inet([192, 0, 2, 1], [198, 51, 100, 2]))
      expectInvalid(header.subarray(0, 16), /version|command/)
      expectInvalid(header)
    }
  })

  it("an unknown family or transport, or a length too short for the family's addresses, is invalid", () => {
    expectInvalid(v2(PROXY, 0x41, Buffer.alloc(12)), /family/)
    expectInvalid(v2(PROXY, 0x13, Buffer.alloc(12)), /family/)
    expectInvalid(v2(PROXY, TCP4, Buffer.alloc(11)), /cannot hold/)
    expectInvalid(v2(PROXY, TCP6, Buffer.alloc(35)), /cannot hold/)
    expectInvalid(v2(PROXY, UNIX_STREAM, Buffer.alloc(215)), /cannot hold/)
  })

  it("a length past 4096 is invalid from the fixed 16 bytes, not after waiting for what it announces", () => {
    const atCap = v2(PROXY, TCP4, Buffer.concat([inet([192, 0, 2, 1], [198, 51, 100, 2]), Buffer.alloc(4096 - 12)]))
    expect(parseProxyHeader(atCap)).toEqual(parsed("192.0.2.1", 16 + 4096))
    const pastCap = v2(PROXY, TCP4, Buffer.concat([inet([192, 0, 2, 1], [198, 51, 100, 2]), Buffer.alloc(4097 - 12)]))
    expectInvalid(pastCap.subarray(0, 16), /4097/)
    const largest = Buffer.from(pastCap.subarray(0, 16))
    largest.writeUInt16BE(65535, 14)
    expectInvalid(largest)
  })
})

describe("parseProxyHeader: no header", () => {
  it("a wrong signature is invalid as soon as a byte disagrees", () => {
    expectInvalid(v1("PROXZ TCP4 192.0.2.1 198.51.100.2 1 2\r\n"), /signature/)
    expectInvalid(v1("proxy TCP4 192.0.2.1 198.51.100.2 1 2\r\n"), /signature/)
    expectInvalid(v1("PROXYTCP4"), /signature/)
    for (let at = 0; at < 12; at++) {
      const header = v2(PROXY, TCP4, inet([192, 0, 2, 1], [198, 51, 100, 2]))
      header[at] = header[at]! ^ 0x20
      expectInvalid(header.subarray(0, at + 1), /signature/)
    }
  })

  it("plain HTTP (or TLS) is invalid from the first byte no header begins with, never a wait for more", () => {
    // "P" may begin "PROXY ": POST is judged at its "O".
    for (const [request, from] of [["GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1], ["POST /threads/t1 HTTP/1.1\r\n", 2], ["\x16\x03\x01\x02\x00", 1]] as const) {
      for (let length = from; length <= request.length; length++) expectInvalid(v1(request.slice(0, length)), /signature/)
    }
    expect(tagOf(v1("P"))).toBe("NeedMore")
    expect(tagOf(Buffer.alloc(0))).toBe("NeedMore")
  })
})

describe("parseProxyHeader: properties", () => {
  const port = fc.integer({ min: 0, max: 65535 })
  const bytes = (length: number) => fc.map(fc.uint8Array({ minLength: length, maxLength: length }), (array) => Buffer.from(array))
  const trailing = fc.map(fc.uint8Array({ maxLength: 64, size: "max" }), (array) => Buffer.from(array))
  const tlvs = fc.map(fc.uint8Array({ maxLength: 300, size: "max" }), (array) => Buffer.from(array))
  /** Eight groups written out in full, upper case: the text a v1 header may carry for these 16 bytes. */
  const spelledOut = (address: Buffer) => Array.from({ length: 8 }, (_, i) => address.readUInt16BE(2 * i).toString(16).toUpperCase().padStart(4, "0")).join(":")

  it("any v1 TCP4 header: every prefix asks for more; whole, then anything, it gives its source", async () => {
    await fc.assertProperty(fc.tuple(fc.ipV4(), fc.ipV4(), port, port, trailing), ([source, destination, sourcePort, destinationPort, after]) =>
      expectHeader(v1(`PROXY TCP4 ${source} ${destination} ${sourcePort} ${destinationPort}\r\n`), source, after)
    )
  })

  it("any v2 IPv4 header with any TLV bytes: every prefix asks for more; whole, then anything, it gives its source", async () => {
    await fc.assertProperty(fc.tuple(bytes(4), bytes(4), port, port, tlvs, trailing), ([source, destination, sourcePort, destinationPort, extra, after]) =>
      expectHeader(v2(PROXY, TCP4, Buffer.concat([inet([...source], [...destination], sourcePort, destinationPort), extra])), [...source].join("."), after)
    )
  })

  it("any IPv6 source: v2's 16 bytes and v1's text of them give the same address, a valid one", async () => {
    await fc.assertProperty(fc.tuple(bytes(16), bytes(16), tlvs, trailing), ([source, destination, extra, after]) => {
      const fromV1 = parseProxyHeader(v1(`PROXY TCP6 ${spelledOut(source)} ${spelledOut(destination)} 1 2\r\n`))
      expect(fromV1._tag).toBe("Parsed")
      const address = fromV1._tag === "Parsed" ? fromV1.source : undefined
      expect(net.isIP(address ?? "")).not.toBe(0)
      expect(address).toBe(address?.toLowerCase())
      expectHeader(v2(PROXY, TCP6, Buffer.concat([inet6(source, destination), extra])), address, after)
    })
  })

  it("any LOCAL header: every prefix asks for more; whole, it gives no source", async () => {
    await fc.assertProperty(fc.tuple(fc.integer({ min: 0, max: 255 }), tlvs, trailing), ([familyTransport, extra, after]) =>
      expectHeader(v2(LOCAL, familyTransport, extra), undefined, after)
    )
  })
})

// ---- A node:http server reading the headers ---------------------------------------------------

interface Served {
  readonly port: number
  readonly requests: () => number
  readonly close: () => Promise<void>
}

/** The handler's answer: what the proxied peer and the socket's own peer are, and the request. */
const answerOf = (req: IncomingMessage, body: Buffer) =>
  `peer=${proxiedPeer(req.socket) ?? "none"} remote=${req.socket.remoteAddress} ${req.method} ${req.url} body=${body.length}\n`

/** A node:http server on 127.0.0.1 (a free port) reading a PROXY header off each connection, and answering WebSockets with the peer. */
const serve = async (timeoutMs: number, install: "before listen" | "after listen" = "after listen"): Promise<Served> => {
  let requests = 0
  const server = http.createServer((req, res) => {
    requests++
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => res.end(answerOf(req, Buffer.concat(chunks))))
  })
  const sockets = new WebSocketServer({ noServer: true })
  server.on("upgrade", (req: IncomingMessage, socket, head: Buffer) =>
    sockets.handleUpgrade(req, socket, head, (ws) => {
      ws.send(`peer=${proxiedPeer(req.socket) ?? "none"}`)
      ws.on("message", (data: Buffer) => ws.send(`echo ${data.toString()}`))
    })
  )
  if (install === "before listen") acceptProxyProtocol(server, { timeoutMs })
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  if (install === "after listen") acceptProxyProtocol(server, { timeoutMs })
  return {
    port: (server.address() as AddressInfo).port,
    requests: () => requests,
    close: async () => {
      for (const ws of sockets.clients) ws.terminate()
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  }
}

interface Client {
  readonly socket: net.Socket
  /** Everything the server sent so far. */
  readonly received: () => string
  /** Resolves when the connection is closed, with the ms since it was opened. */
  readonly closed: Promise<number>
  /** Writes `data` a piece at a time (one byte each by default), each in its own packet. */
  readonly drip: (data: Buffer | string, pieceBytes?: number, gapMs?: number) => Promise<void>
}

const connect = async (port: number): Promise<Client> => {
  const openedAt = performance.now()
  const socket = net.connect(port, "127.0.0.1")
  // No Nagle: every piece written leaves as its own segment.
  socket.setNoDelay(true)
  await once(socket, "connect")
  const chunks: Array<Buffer> = []
  socket.on("data", (chunk: Buffer) => chunks.push(chunk))
  socket.on("error", () => undefined)
  const closed = new Promise<number>((resolve) => socket.on("close", () => resolve(performance.now() - openedAt)))
  const drip = async (data: Buffer | string, pieceBytes = 1, gapMs = 1) => {
    const bytes = typeof data === "string" ? Buffer.from(data, "latin1") : data
    for (let at = 0; at < bytes.length && !socket.destroyed; at += pieceBytes) {
      socket.write(bytes.subarray(at, at + pieceBytes))
      await new Promise((resolve) => setTimeout(resolve, gapMs))
    }
  }
  return { socket, received: () => Buffer.concat(chunks).toString("latin1"), closed, drip }
}

/** The handler's answers in what `client` received, once there are `count` of them. */
const answers = (client: Client, count: number): Promise<Array<string>> =>
  poll(
    () => {
      const found = client.received().match(/^peer=.*$/gm) ?? []
      return found.length >= count ? found : undefined
    },
    { timeoutMs: 5000, reason: `${count} answers` }
  )

const get = (path: string, headers = "") => `GET ${path} HTTP/1.1\r\nHost: pinboard.example\r\n${headers}\r\n`
const post = (path: string, body: string) => `POST ${path} HTTP/1.1\r\nHost: pinboard.example\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`

const V1_HEADER = "PROXY TCP4 203.0.113.7 10.0.0.1 56324 8080\r\n"
const V2_HEADER = v2(PROXY, TCP6, Buffer.concat([inet6(v6(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x42), v6(0, 0, 0, 0, 0, 0, 0, 1)), tlv(0x04, Buffer.alloc(5))]))

describe("acceptProxyProtocol on a node:http server", () => {
  let server: Served
  beforeAll(async () => {
    server = await serve(scaled(5000))
  })
  afterAll(() => server.close())

  it("a v1 header sent byte by byte, then a request: the handler sees the header's source", async () => {
    const client = await connect(server.port)
    await client.drip(V1_HEADER)
    await client.drip(get("/one"), 7)
    expect(await answers(client, 1)).toEqual(["peer=203.0.113.7 remote=127.0.0.1 GET /one body=0"])
    client.socket.destroy()
  })

  it("a v2 header sent byte by byte, then a request: the handler sees the header's source", async () => {
    const client = await connect(server.port)
    await client.drip(V2_HEADER)
    await client.drip(get("/two"))
    expect(await answers(client, 1)).toEqual(["peer=2001:db8::42 remote=127.0.0.1 GET /two body=0"])
    client.socket.destroy()
  })

  it("the header and the first request in one write, then a second request with a body on the same connection", async () => {
    for (const header of [Buffer.from(V1_HEADER, "latin1"), V2_HEADER]) {
      const client = await connect(server.port)
      client.socket.write(Buffer.concat([header, Buffer.from(get("/first"), "latin1")]))
      await answers(client, 1)
      client.socket.write(post("/second", "hello"))
      const source = header === V2_HEADER ? "2001:db8::42" : "203.0.113.7"
      expect(await answers(client, 2)).toEqual([`peer=${source} remote=127.0.0.1 GET /first body=0`, `peer=${source} remote=127.0.0.1 POST /second body=5`])
      client.socket.destroy()
    }
  })

  it("the header, two pipelined requests and a large body in one write are all read", async () => {
    const client = await connect(server.port)
    const body = "x".repeat(1 << 20)
    client.socket.write(V1_HEADER + get("/a") + post("/b", body) + get("/c"))
    expect(await answers(client, 3)).toEqual([
      "peer=203.0.113.7 remote=127.0.0.1 GET /a body=0",
      `peer=203.0.113.7 remote=127.0.0.1 POST /b body=${1 << 20}`,
      "peer=203.0.113.7 remote=127.0.0.1 GET /c body=0"
    ])
    client.socket.destroy()
  })

  it("header and request split at random points, each piece its own packet, read alike", async () => {
    // The bytes after the header are an HTTP request whose first header line the server must not mistake for a PROXY header.
    const request = Buffer.concat([V2_HEADER, Buffer.from(get("/split", "X-Trace: PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n"), "latin1")])
    await fc.assertProperty(
      fc.uniqueArray(fc.integer({ min: 1, max: request.length - 1 }), { maxLength: 6 }),
      async (cuts) => {
        const client = await connect(server.port)
        const points = [0, ...[...cuts].sort((a, b) => a - b), request.length]
        for (let i = 1; i < points.length; i++) {
          client.socket.write(request.subarray(points[i - 1], points[i]))
          await new Promise((resolve) => setTimeout(resolve, 2))
        }
        expect(await answers(client, 1)).toEqual(["peer=2001:db8::42 remote=127.0.0.1 GET /split body=0"])
        client.socket.destroy()
      },
      { runs: 25 }
    )
  })

  it("LOCAL and UNKNOWN: the connection is served, with no proxied peer (the socket's own stands)", async () => {
    for (const header of [v2(LOCAL, UNSPEC, Buffer.alloc(0)), v1("PROXY UNKNOWN\r\n")]) {
      const client = await connect(server.port)
      client.socket.write(Buffer.concat([header, Buffer.from(get("/health"), "latin1")]))
      expect(await answers(client, 1)).toEqual(["peer=none remote=127.0.0.1 GET /health body=0"])
      client.socket.destroy()
    }
  })

  it("no header: the connection is closed and not a byte is written, the handler never runs", async () => {
    const before = server.requests()
    for (const data of [get("/"), "PROXY TCP4 203.0.113.7 10.0.0.1 56324 99999\r\n" + get("/"), Buffer.concat([v2(0x31, TCP4, Buffer.alloc(12)), Buffer.from(get("/"))])]) {
      const exchange = await rawExchange(server.port, data)
      expect(exchange.closed).toBe(true)
      expect(exchange.bytes.length).toBe(0)
    }
    expect(server.requests()).toBe(before)
  })

  it("a WebSocket upgrade behind a header: the handshake, the peer and messages both ways", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${server.port}/threads/t1/stream`, {
      createConnection: () => {
        const socket = net.connect(server.port, "127.0.0.1")
        socket.write(V1_HEADER)
        return socket
      }
    })
    const messages: Array<string> = []
    const got = (count: number) => poll(() => messages.length >= count, { timeoutMs: 5000, reason: `${count} WebSocket messages` })
    ws.on("message", (data: Buffer) => messages.push(data.toString()))
    await within(once(ws, "open"), 5000, "the WebSocket handshake")
    await got(1)
    ws.send("hi")
    await got(2)
    expect(messages).toEqual(["peer=203.0.113.7", "echo hi"])
    ws.close()
  })

  it("the server's own 'connection' listeners run after the header, with the proxied peer known", async () => {
    const seen: Array<string | undefined> = []
    const raw = http.createServer((req, res) => res.end(answerOf(req, Buffer.alloc(0))))
    raw.on("connection", (socket: net.Socket) => seen.push(proxiedPeer(socket)))
    acceptProxyProtocol(raw, { timeoutMs: scaled(5000) })
    raw.listen(0, "127.0.0.1")
    await once(raw, "listening")
    const client = await connect((raw.address() as AddressInfo).port)
    await client.drip(V1_HEADER.slice(0, -1), 5)
    expect(seen).toEqual([])
    client.socket.write("\n" + get("/"))
    expect(await answers(client, 1)).toEqual(["peer=203.0.113.7 remote=127.0.0.1 GET / body=0"])
    expect(seen).toEqual(["203.0.113.7"])
    client.socket.destroy()
    raw.closeAllConnections()
    await new Promise((resolve) => raw.close(resolve))
  })
})

describe("acceptProxyProtocol on a plain net.Server", () => {
  it("the bytes after the header wait, buffered, for a listener that takes them later", async () => {
    const plainServer = net.createServer((socket) => {
      // Not node:http: this listener reads a tick later, and resumes the socket itself.
      setImmediate(() => {
        socket.on("data", (chunk: Buffer) => socket.write(`peer=${proxiedPeer(socket) ?? "none"} got=${chunk.toString("latin1")}\n`))
        socket.resume()
      })
    })
    acceptProxyProtocol(plainServer, { timeoutMs: scaled(5000) })
    plainServer.listen(0, "127.0.0.1")
    await once(plainServer, "listening")
    const client = await connect((plainServer.address() as AddressInfo).port)
    client.socket.write(V1_HEADER + "hello")
    expect(await answers(client, 1)).toEqual(["peer=203.0.113.7 got=hello"])
    client.socket.destroy()
    await new Promise((resolve) => plainServer.close(resolve))
  })
})

describe("acceptProxyProtocol: a header that is late or cut off", () => {
  const TIMEOUT_MS = 200
  let server: Served
  beforeAll(async () => {
    server = await serve(TIMEOUT_MS, "before listen")
  })
  afterAll(() => server.close())

  it("a header not whole within timeoutMs is cut: the socket destroyed, nothing written", async () => {
    const client = await connect(server.port)
    client.socket.write("PROXY TCP4 203.0.113.7 ")
    const afterMs = await within(client.closed, 5000, "the cut")
    expect(afterMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 20)
    expect(client.received()).toBe("")
  })

  it("the bound is on the whole header, not between bytes: a slow drip is cut too", async () => {
    const client = await connect(server.port)
    const dripping = client.drip(V1_HEADER, 1, 25)
    const afterMs = await within(client.closed, 5000, "the cut")
    await dripping
    expect(afterMs).toBeLessThan(V1_HEADER.length * 25)
    expect(client.received()).toBe("")
  })

  it("a header in time is served, and its timer does not cut the connection later", async () => {
    const client = await connect(server.port)
    client.socket.write(V1_HEADER)
    client.socket.write(get("/in-time"))
    await answers(client, 1)
    // Past the header's timeout: the connection is still the server's, for a second request.
    await new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS * 2))
    client.socket.write(get("/later"))
    expect(await answers(client, 2)).toEqual(["peer=203.0.113.7 remote=127.0.0.1 GET /in-time body=0", "peer=203.0.113.7 remote=127.0.0.1 GET /later body=0"])
    client.socket.destroy()
  })

  it("a client that resets or half-closes mid-header raises no unhandled error; the server serves on", async () => {
    const reset = await connect(server.port)
    reset.socket.write("PROXY TCP4 203.0.")
    await new Promise((resolve) => setTimeout(resolve, 20))
    reset.socket.resetAndDestroy()
    // Half-closed, no header can follow: the socket is destroyed then, not at the timeout.
    const halfClosed = await connect(server.port)
    const endedAt = performance.now()
    halfClosed.socket.end("PROXY TCP4 203.0.")
    await within(halfClosed.closed, 5000, "the half-closed connection closed")
    expect(performance.now() - endedAt).toBeLessThan(TIMEOUT_MS / 2)
    expect(halfClosed.received()).toBe("")
    const client = await connect(server.port)
    client.socket.write(V1_HEADER + get("/after"))
    expect(await answers(client, 1)).toEqual(["peer=203.0.113.7 remote=127.0.0.1 GET /after body=0"])
    client.socket.destroy()
  })
})
