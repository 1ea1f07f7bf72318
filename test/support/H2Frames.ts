// HTTP/2 frame by frame (RFC 9113), for tests that must send what no ordinary client sends, or
// watch what a client library would hide: SETTINGS values, RST_STREAM and GOAWAY codes, flow
// control windows. A connection over node:net (h2c with prior knowledge) or node:tls (ALPN h2)
// writes frames the test builds and records every frame it reads.
//
// HPACK (RFC 7541) both ways, only as far as the tests need: requests are encoded as literal
// fields without indexing, new names, no Huffman coding; answers are decoded with the static
// table alone, which holds because the client's SETTINGS ask for a header table of 0 bytes
// (`DEFAULT_CLIENT_SETTINGS`), and Huffman-coded strings are left undecoded. `:status` is
// always readable: a static-table entry or a three-digit literal (never shorter in Huffman).
import net from "node:net"
import tls from "node:tls"
import { scaled } from "./Time.js"

export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1")

export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9
} as const

export const Flags = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const

export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6
} as const

export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  ENHANCE_YOUR_CALM: 0xb
} as const

export interface Frame {
  readonly type: number
  readonly flags: number
  readonly streamId: number
  readonly payload: Buffer
}

const typeNames = new Map<number, string>(Object.entries(FrameType).map(([name, type]) => [type, name]))

/** One line per frame, for failure messages. */
export const describeFrame = (f: Frame): string => {
  const name = typeNames.get(f.type) ?? `type ${f.type}`
  const extra =
    f.type === FrameType.RST_STREAM
      ? ` code ${f.payload.readUInt32BE(0)}`
      : f.type === FrameType.GOAWAY
        ? ` last ${goawayOf(f).lastStreamId} code ${goawayOf(f).code}`
        : f.type === FrameType.WINDOW_UPDATE
          ? ` +${f.payload.readUInt32BE(0) & 0x7fffffff}`
          : ` ${f.payload.length} bytes`
  return `${name} stream ${f.streamId} flags 0x${f.flags.toString(16)}${extra}`
}

// ---- frames out -------------------------------------------------------------------------------

export const frame = (type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer => {
  const head = Buffer.alloc(9)
  head.writeUIntBE(payload.length, 0, 3)
  head.writeUInt8(type, 3)
  head.writeUInt8(flags, 4)
  head.writeUInt32BE(streamId & 0x7fffffff, 5)
  return Buffer.concat([head, payload])
}

export const settingsFrame = (settings: ReadonlyArray<readonly [number, number]>): Buffer => {
  const payload = Buffer.alloc(6 * settings.length)
  settings.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, 6 * i)
    payload.writeUInt32BE(value, 6 * i + 2)
  })
  return frame(FrameType.SETTINGS, 0, 0, payload)
}

export const settingsAck = (): Buffer => frame(FrameType.SETTINGS, Flags.ACK, 0)

export const pingFrame = (data: Buffer, ack = false): Buffer => frame(FrameType.PING, ack ? Flags.ACK : 0, 0, data)

export const windowUpdateFrame = (streamId: number, increment: number): Buffer => {
  const payload = Buffer.alloc(4)
  payload.writeUInt32BE(increment & 0x7fffffff)
  return frame(FrameType.WINDOW_UPDATE, 0, streamId, payload)
}

export const rstStreamFrame = (streamId: number, code: number): Buffer => {
  const payload = Buffer.alloc(4)
  payload.writeUInt32BE(code)
  return frame(FrameType.RST_STREAM, 0, streamId, payload)
}

export const dataFrame = (streamId: number, data: Buffer, endStream: boolean): Buffer =>
  frame(FrameType.DATA, endStream ? Flags.END_STREAM : 0, streamId, data)

/** HPACK integer with an `n`-bit prefix whose high bits are `first` (RFC 7541 5.1). */
const hpackInteger = (value: number, n: number, first: number): Array<number> => {
  const max = (1 << n) - 1
  if (value < max) return [first | value]
  const out = [first | max]
  let rest = value - max
  while (rest >= 128) {
    out.push((rest % 128) + 128)
    rest = Math.floor(rest / 128)
  }
  out.push(rest)
  return out
}

/** Each field as "literal header field without indexing, new name", strings without Huffman coding. */
export const encodeHeaderBlock = (fields: ReadonlyArray<readonly [string, string]>): Buffer => {
  const parts: Array<Buffer> = []
  for (const [name, value] of fields) {
    const n = Buffer.from(name, "latin1")
    const v = Buffer.from(value, "latin1")
    parts.push(Buffer.from([0x00, ...hpackInteger(n.length, 7, 0)]), n, Buffer.from(hpackInteger(v.length, 7, 0)), v)
  }
  return Buffer.concat(parts)
}

/** A request's HEADERS frame (END_HEADERS set, one frame). */
export const headersFrame = (streamId: number, fields: ReadonlyArray<readonly [string, string]>, endStream: boolean): Buffer =>
  frame(FrameType.HEADERS, Flags.END_HEADERS | (endStream ? Flags.END_STREAM : 0), streamId, encodeHeaderBlock(fields))

/** The pseudo-header fields of a GET (h2c: scheme http) and any more fields after them. */
export const requestFields = (
  method: string,
  authority: string,
  path: string,
  more: ReadonlyArray<readonly [string, string]> = [],
  scheme = "http"
): Array<readonly [string, string]> => [[":method", method], [":scheme", scheme], [":authority", authority], [":path", path], ...more]

// ---- frames in --------------------------------------------------------------------------------

export const settingsOf = (f: Frame): Map<number, number> => {
  const settings = new Map<number, number>()
  for (let i = 0; i + 6 <= f.payload.length; i += 6) settings.set(f.payload.readUInt16BE(i), f.payload.readUInt32BE(i + 2))
  return settings
}

export const goawayOf = (f: Frame): { readonly lastStreamId: number; readonly code: number; readonly debug: string } => ({
  lastStreamId: f.payload.readUInt32BE(0) & 0x7fffffff,
  code: f.payload.readUInt32BE(4),
  debug: f.payload.subarray(8).toString("latin1")
})

export const rstCodeOf = (f: Frame): number => f.payload.readUInt32BE(0)

/** A DATA frame's data, its padding removed. */
export const dataOf = (f: Frame): Buffer => {
  if ((f.flags & Flags.PADDED) === 0) return f.payload
  const pad = f.payload.readUInt8(0)
  return f.payload.subarray(1, f.payload.length - pad)
}

// RFC 7541 Appendix A.
const STATIC_TABLE: ReadonlyArray<readonly [string, string]> = [
  [":authority", ""], [":method", "GET"], [":method", "POST"], [":path", "/"], [":path", "/index.html"], [":scheme", "http"],
  [":scheme", "https"], [":status", "200"], [":status", "204"], [":status", "206"], [":status", "304"], [":status", "400"],
  [":status", "404"], [":status", "500"], ["accept-charset", ""], ["accept-encoding", "gzip, deflate"], ["accept-language", ""],
  ["accept-ranges", ""], ["accept", ""], ["access-control-allow-origin", ""], ["age", ""], ["allow", ""], ["authorization", ""],
  ["cache-control", ""], ["content-disposition", ""], ["content-encoding", ""], ["content-language", ""], ["content-length", ""],
  ["content-location", ""], ["content-range", ""], ["content-type", ""], ["cookie", ""], ["date", ""], ["etag", ""], ["expect", ""],
  ["expires", ""], ["from", ""], ["host", ""], ["if-match", ""], ["if-modified-since", ""], ["if-none-match", ""], ["if-range", ""],
  ["if-unmodified-since", ""], ["last-modified", ""], ["link", ""], ["location", ""], ["max-forwards", ""], ["proxy-authenticate", ""],
  ["proxy-authorization", ""], ["range", ""], ["referer", ""], ["refresh", ""], ["retry-after", ""], ["server", ""], ["set-cookie", ""],
  ["strict-transport-security", ""], ["transfer-encoding", ""], ["user-agent", ""], ["vary", ""], ["via", ""], ["www-authenticate", ""]
]

/** A decoded field; `value` (or `name`) is undefined where the string was Huffman-coded. */
export interface DecodedField {
  readonly name: string | undefined
  readonly value: string | undefined
}

/**
 * Decodes a header block with the static table only: the peer must have been told a header
 * table size of 0 (it then never refers to a dynamic entry). Huffman-coded strings come back
 * undefined.
 */
export const decodeHeaderBlock = (block: Buffer): Array<DecodedField> => {
  let at = 0
  const integer = (n: number): number => {
    const max = (1 << n) - 1
    let value = block[at++]! & max
    if (value < max) return value
    let shift = 0
    for (;;) {
      const byte = block[at++]!
      value += (byte & 0x7f) * 2 ** shift
      shift += 7
      if ((byte & 0x80) === 0) return value
    }
  }
  const string = (): string | undefined => {
    const huffman = (block[at]! & 0x80) !== 0
    const length = integer(7)
    const bytes = block.subarray(at, at + length)
    at += length
    return huffman ? undefined : bytes.toString("latin1")
  }
  const indexed = (index: number): readonly [string, string] => {
    const entry = STATIC_TABLE[index - 1]
    if (entry === undefined) throw new Error(`HPACK index ${index} is not in the static table (the peer used a dynamic table)`)
    return entry
  }
  const fields: Array<DecodedField> = []
  while (at < block.length) {
    const byte = block[at]!
    if ((byte & 0x80) !== 0) {
      const [name, value] = indexed(integer(7))
      fields.push({ name, value })
    } else if ((byte & 0xe0) === 0x20) {
      integer(5) // dynamic table size update
    } else {
      const prefix = (byte & 0xc0) === 0x40 ? 6 : 4
      const index = integer(prefix)
      const name = index === 0 ? string() : indexed(index)[0]
      fields.push({ name, value: string() })
    }
  }
  return fields
}

/** The `:status` of a response's HEADERS frame (one frame: END_HEADERS). */
export const statusOf = (f: Frame): number => {
  if ((f.flags & Flags.END_HEADERS) === 0) throw new Error("a header block over CONTINUATION frames is not decoded here")
  let block = f.payload
  if ((f.flags & Flags.PADDED) !== 0) block = block.subarray(1, block.length - block.readUInt8(0))
  if ((f.flags & Flags.PRIORITY) !== 0) block = block.subarray(5)
  const status = decodeHeaderBlock(block).find((field) => field.name === ":status")
  if (status?.value === undefined) throw new Error("no readable :status in the header block")
  return Number(status.value)
}

// ---- a connection -----------------------------------------------------------------------------

/** What the client says in its first SETTINGS unless told otherwise: no push, no dynamic header table. */
export const DEFAULT_CLIENT_SETTINGS: ReadonlyArray<readonly [number, number]> = [
  [Setting.HEADER_TABLE_SIZE, 0],
  [Setting.ENABLE_PUSH, 0]
]

export interface H2Connection {
  /** Every frame read so far, in order. */
  readonly frames: ReadonlyArray<Frame>
  readonly write: (...frames: ReadonlyArray<Buffer>) => void
  /** The first frame (read so far or to come) matching `match`; fails after `timeoutMs` (nominal, scaled), listing the frames read. */
  readonly waitFor: (match: (f: Frame) => boolean, reason: string, timeoutMs?: number) => Promise<Frame>
  /** Resolves once the peer has closed the connection (or it failed). */
  readonly closed: Promise<void>
  readonly isClosed: () => boolean
  /** Every frame read so far, one line each. */
  readonly describe: () => string
  readonly destroy: () => void
}

/** Reads frames off `socket` (after whatever it has already read: nothing, the preface was ours to send). */
const track = (socket: net.Socket): H2Connection => {
  const frames: Array<Frame> = []
  const waiters = new Set<() => void>()
  let pending: Buffer = Buffer.alloc(0)
  let closed = false
  let onClosed: () => void = () => undefined
  const closedPromise = new Promise<void>((resolve) => (onClosed = resolve))
  const wake = () => {
    for (const waiter of [...waiters]) waiter()
  }
  socket.on("data", (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    while (pending.length >= 9) {
      const length = pending.readUIntBE(0, 3)
      if (pending.length < 9 + length) break
      frames.push({
        type: pending.readUInt8(3),
        flags: pending.readUInt8(4),
        streamId: pending.readUInt32BE(5) & 0x7fffffff,
        payload: Buffer.from(pending.subarray(9, 9 + length))
      })
      pending = pending.subarray(9 + length)
    }
    wake()
  })
  const end = () => {
    if (closed) return
    closed = true
    onClosed()
    wake()
  }
  socket.on("close", end)
  socket.on("end", end)
  socket.on("error", end)
  const describe = () => frames.map(describeFrame).join("\n")
  const waitFor = (match: (f: Frame) => boolean, reason: string, timeoutMs = 5000): Promise<Frame> =>
    new Promise((resolve, reject) => {
      const check = () => {
        const found = frames.find(match)
        if (found !== undefined) {
          done()
          resolve(found)
        } else if (closed) {
          done()
          reject(new Error(`connection closed before ${reason}; frames read:\n${describe()}`))
        }
      }
      const timer = setTimeout(() => {
        done()
        reject(new Error(`${reason}: not within ${scaled(timeoutMs)} ms; frames read:\n${describe()}`))
      }, scaled(timeoutMs))
      const done = () => {
        clearTimeout(timer)
        waiters.delete(check)
      }
      waiters.add(check)
      check()
    })
  return {
    frames,
    write: (...out) => void socket.write(Buffer.concat(out)),
    waitFor,
    closed: closedPromise,
    isClosed: () => closed,
    describe,
    destroy: () => socket.destroy()
  }
}

export interface ConnectOptions {
  /** The client's SETTINGS frame (sent right after the preface); default `DEFAULT_CLIENT_SETTINGS`. */
  readonly settings?: ReadonlyArray<readonly [number, number]>
  /** Over TLS with ALPN h2, trusting this CA (PEM); plain TCP (h2c, prior knowledge) without. */
  readonly ca?: Buffer
  readonly timeoutMs?: number
}

/** Connects, sends the preface and the client's SETTINGS; the server's frames are read from then on. */
export const connectH2 = (port: number, options: ConnectOptions = {}): Promise<H2Connection> =>
  new Promise((resolve, reject) => {
    const opening = Buffer.concat([PREFACE, settingsFrame(options.settings ?? DEFAULT_CLIENT_SETTINGS)])
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error(`no connection to port ${port} within ${scaled(options.timeoutMs ?? 5000)} ms`))
    }, scaled(options.timeoutMs ?? 5000))
    const ready = () => {
      clearTimeout(timer)
      socket.off("error", failed)
      const connection = track(socket)
      socket.write(opening)
      resolve(connection)
    }
    const failed = (error: Error) => {
      clearTimeout(timer)
      socket.destroy()
      reject(error)
    }
    const socket: net.Socket =
      options.ca === undefined
        ? net.connect(port, "127.0.0.1", ready)
        : tls.connect({ host: "127.0.0.1", port, servername: "localhost", ca: options.ca, ALPNProtocols: ["h2"] }, function (this: tls.TLSSocket) {
            if (this.alpnProtocol !== "h2") return failed(new Error(`ALPN chose ${String(this.alpnProtocol)}, not h2`))
            ready()
          })
    socket.once("error", failed)
  })

/** The server's first SETTINGS (not an ACK), and the ACK of the client's, once both are read. */
export const handshake = async (connection: H2Connection): Promise<Map<number, number>> => {
  const settings = await connection.waitFor((f) => f.type === FrameType.SETTINGS && (f.flags & Flags.ACK) === 0, "the server's SETTINGS")
  connection.write(settingsAck())
  await connection.waitFor((f) => f.type === FrameType.SETTINGS && (f.flags & Flags.ACK) !== 0, "the server's ACK of the client's SETTINGS")
  return settingsOf(settings)
}

/** The data of every DATA frame of `streamId` read so far, in order. */
export const bodyOf = (connection: H2Connection, streamId: number): Buffer =>
  Buffer.concat(connection.frames.filter((f) => f.type === FrameType.DATA && f.streamId === streamId).map(dataOf))

/** Whether the stream has ended from the server's side (END_STREAM on DATA or HEADERS) or was reset. */
export const endOf = (streamId: number) => (f: Frame): boolean =>
  f.streamId === streamId &&
  (((f.type === FrameType.DATA || f.type === FrameType.HEADERS) && (f.flags & Flags.END_STREAM) !== 0) || f.type === FrameType.RST_STREAM)
