// What goes over the wire in tests that talk to a server (the built Pinboard or one in-process):
// one request per connection through node:http, with raw header lists, and raw sockets for what
// node:http would not send or would hide.
import { randomBytes } from "node:crypto"
import http, { type IncomingHttpHeaders, type OutgoingHttpHeaders } from "node:http"
import net from "node:net"
import type { Pinboard } from "./Fleet.js"
import { scaled } from "./Time.js"

// ---- HTTP through node:http -------------------------------------------------------------------

export interface Answer {
  readonly status: number
  readonly statusMessage: string
  readonly headers: IncomingHttpHeaders
  /** Name, value pairs as received (names as sent on the wire). */
  readonly rawHeaders: ReadonlyArray<string>
  readonly body: Buffer
  readonly text: string
}

export interface RequestOptions {
  readonly method?: string
  readonly headers?: OutgoingHttpHeaders | ReadonlyArray<[string, string]>
  /** A list is written piece by piece, each once the last has drained (a chunk each when chunked). */
  readonly body?: string | Buffer | ReadonlyArray<string | Buffer>
  /** Nominal ms without an answer before it fails (scaled by PINBOARD_TEST_TIME_SCALE); default 10 s. */
  readonly timeoutMs?: number
}

const isOnePiece = (body: string | Buffer | ReadonlyArray<string | Buffer>): body is string | Buffer =>
  typeof body === "string" || Buffer.isBuffer(body)

const writePieces = (req: http.ClientRequest, pieces: ReadonlyArray<string | Buffer>, from = 0): void => {
  for (let i = from; i < pieces.length; i++) {
    if (!req.write(pieces[i]!)) return void req.once("drain", () => writePieces(req, pieces, i + 1))
  }
  req.end()
}

/** One request on its own connection; `path` is sent byte for byte (nothing normalized). */
export const request = (pinboard: Pinboard | { readonly port: number }, path: string, options: RequestOptions = {}): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const pairs: Array<[string, string]> = Array.isArray(options.headers)
      ? [...(options.headers as Array<[string, string]>)]
      : Object.entries(options.headers ?? {}).map(([name, value]) => [name, String(value)])
    // node:http sends a DELETE/OPTIONS body unframed unless it is sized (or the caller frames it).
    const { body } = options
    if (body !== undefined && !pairs.some(([name]) => ["content-length", "transfer-encoding"].includes(name.toLowerCase()))) {
      const size = isOnePiece(body) ? Buffer.byteLength(body) : body.reduce((sum, piece) => sum + Buffer.byteLength(piece), 0)
      pairs.push(["Content-Length", String(size)])
    }
    // With a raw header list node:http adds no Host of its own, as every HTTP/1.1 client must.
    if (!pairs.some(([name]) => name.toLowerCase() === "host")) pairs.unshift(["Host", `127.0.0.1:${pinboard.port}`])
    const headers = pairs.flat()
    const req = http.request({
      host: "127.0.0.1",
      port: pinboard.port,
      method: options.method ?? "GET",
      path: path.startsWith("/") ? path : `/${path}`,
      agent: false,
      headers
    })
    req.setTimeout(scaled(options.timeoutMs ?? 10_000), () => req.destroy(new Error(`no answer to ${path} in time`)))
    req.on("error", reject)
    req.on("response", (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("error", reject)
      res.on("aborted", () => reject(new Error(`response to ${path} aborted`)))
      res.on("end", () => {
        const body = Buffer.concat(chunks)
        resolve({
          status: res.statusCode ?? 0,
          statusMessage: res.statusMessage ?? "",
          headers: res.headers,
          rawHeaders: res.rawHeaders,
          body,
          text: body.toString("utf8")
        })
      })
    })
    if (body === undefined || isOnePiece(body)) req.end(body)
    else writePieces(req, body)
  })

/** Every value of a header in the raw list, in order (several lines of one name stay apart). */
export const headerValues = (rawHeaders: ReadonlyArray<string>, name: string): Array<string> => {
  const values: Array<string> = []
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === name.toLowerCase()) values.push(rawHeaders[i + 1]!)
  }
  return values
}

/** The lowercased names of a raw header list. */
export const headerNames = (rawHeaders: ReadonlyArray<string>): Array<string> =>
  rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase())

/** Comma-separated tokens over every line of a header, lowercased: `Vary` as a list. */
export const headerTokens = (rawHeaders: ReadonlyArray<string>, name: string): Array<string> =>
  headerValues(rawHeaders, name)
    .flatMap((value) => value.split(","))
    .map((token) => token.trim().toLowerCase())
    .filter((token) => token !== "")

// ---- raw sockets ------------------------------------------------------------------------------

export interface RawExchange {
  /** Everything the server sent. */
  readonly bytes: Buffer
  /** True when the server closed (or reset) the connection within the wait. */
  readonly closed: boolean
}

/**
 * Writes `data` on a fresh connection and collects what comes back until the server closes the
 * connection, or `waitMs` (nominal, scaled) passes (then the client closes it).
 */
export const rawExchange = (port: number, data: string | Buffer, waitMs = 5000): Promise<RawExchange> =>
  new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    let closed = false
    const timer = setTimeout(() => socket.destroy(), scaled(waitMs))
    socket.on("data", (chunk) => chunks.push(chunk))
    socket.on("end", () => {
      closed = true
      socket.destroy()
    })
    socket.on("error", () => {
      closed = true
    })
    socket.on("close", () => {
      clearTimeout(timer)
      resolve({ bytes: Buffer.concat(chunks), closed })
    })
    socket.write(data)
  })

export interface RawResponse {
  readonly statusLine: string
  readonly status: number
  /** Name, value pairs as received. */
  readonly rawHeaders: ReadonlyArray<string>
  readonly body: Buffer
  /** A chunked body's trailer fields, name, value pairs as received. */
  readonly rawTrailers: ReadonlyArray<string>
  /** False when a chunked or sized body ended early. */
  readonly complete: boolean
}

const headerPairs = (lines: ReadonlyArray<string>): Array<string> =>
  lines.flatMap((line) => {
    const colon = line.indexOf(":")
    return [line.slice(0, colon), line.slice(colon + 1).trim()]
  })

/** The chunked body from `from`: its data, trailers and end, or as much as there is. */
const chunkedAt = (bytes: Buffer, from: number) => {
  const parts: Array<Buffer> = []
  let at = from
  for (;;) {
    const lineEnd = bytes.indexOf("\r\n", at)
    if (lineEnd < 0) return { body: Buffer.concat(parts), rawTrailers: [], end: undefined }
    const size = parseInt(bytes.subarray(at, lineEnd).toString("latin1"), 16)
    at = lineEnd + 2
    if (size === 0) {
      const trailersEnd = bytes.indexOf("\r\n", at) === at ? at : bytes.indexOf("\r\n\r\n", at)
      if (trailersEnd < 0) return { body: Buffer.concat(parts), rawTrailers: [], end: undefined }
      const lines = trailersEnd === at ? [] : bytes.subarray(at, trailersEnd).toString("latin1").split("\r\n")
      return { body: Buffer.concat(parts), rawTrailers: headerPairs(lines), end: trailersEnd + (trailersEnd === at ? 2 : 4) }
    }
    const chunk = bytes.subarray(at, at + size)
    parts.push(chunk)
    if (chunk.length < size) return { body: Buffer.concat(parts), rawTrailers: [], end: undefined }
    at += size + 2
  }
}

/**
 * The HTTP/1.1 response that starts at `from` (chunked, sized, bodiless or up to the close), and
 * where the next one starts: undefined while this one is incomplete or runs to the close.
 */
const responseAt = (bytes: Buffer, from: number): { readonly response: RawResponse; readonly next: number | undefined } | undefined => {
  const end = bytes.indexOf("\r\n\r\n", from)
  if (end < 0) return undefined
  const [statusLine, ...lines] = bytes.subarray(from, end).toString("latin1").split("\r\n")
  const rawHeaders = headerPairs(lines)
  const status = Number(statusLine!.split(" ")[1])
  const start = end + 4
  const head = { statusLine: statusLine!, status, rawHeaders }
  if (status < 200 || status === 204 || status === 304) {
    return { response: { ...head, body: Buffer.alloc(0), rawTrailers: [], complete: true }, next: start }
  }
  if (headerTokens(rawHeaders, "transfer-encoding").includes("chunked")) {
    const { body, rawTrailers, end: next } = chunkedAt(bytes, start)
    return { response: { ...head, body, rawTrailers, complete: next !== undefined }, next }
  }
  const length = headerValues(rawHeaders, "content-length")[0]
  if (length !== undefined) {
    const body = bytes.subarray(start, start + Number(length))
    const complete = body.length === Number(length)
    return { response: { ...head, body, rawTrailers: [], complete }, next: complete ? start + body.length : undefined }
  }
  return { response: { ...head, body: bytes.subarray(start), rawTrailers: [], complete: true }, next: undefined }
}

/** Parses one HTTP/1.1 response (chunked, sized, or up to the close). */
export const parseResponse = (bytes: Buffer): RawResponse => {
  const parsed = responseAt(bytes, 0)
  if (parsed === undefined) throw new Error(`no complete response head in ${JSON.stringify(bytes.toString("latin1"))}`)
  return parsed.response
}

/** One keep-alive connection written by hand, read response by response (interim 1xx included). */
export interface RawConnection {
  readonly write: (data: string | Buffer) => void
  /** The first `count` responses, once each is complete; fails after `waitMs` (nominal, scaled) naming what came. */
  readonly responses: (count: number, waitMs?: number) => Promise<Array<RawResponse>>
  readonly close: () => void
}

export const rawConnection = async (port: number): Promise<RawConnection> => {
  const socket = net.connect(port, "127.0.0.1")
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve)
    socket.once("error", reject)
  })
  let bytes = Buffer.alloc(0)
  let ended = false
  const waiters = new Set<() => void>()
  const wake = () => {
    for (const waiter of waiters) waiter()
  }
  socket.on("data", (chunk: Buffer) => {
    bytes = Buffer.concat([bytes, chunk])
    wake()
  })
  socket.on("error", () => undefined)
  socket.on("close", () => {
    ended = true
    wake()
  })
  /** The complete responses so far. */
  const parsed = (): Array<RawResponse> => {
    const responses: Array<RawResponse> = []
    let at: number | undefined = 0
    while (at !== undefined && at < bytes.length) {
      const next = responseAt(bytes, at)
      if (next === undefined || !next.response.complete || (next.next === undefined && !ended)) break
      responses.push(next.response)
      at = next.next
    }
    return responses
  }
  return {
    write: (data) => void socket.write(data),
    responses: (count, waitMs = 5000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          const responses = parsed()
          if (responses.length < count && !ended) return
          clearTimeout(timer)
          waiters.delete(check)
          if (responses.length >= count) resolve(responses.slice(0, count))
          else reject(new Error(`the connection closed after ${responses.length} of ${count} responses: ${JSON.stringify(bytes.toString("latin1"))}`))
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(new Error(`${parsed().length} of ${count} responses in ${scaled(waitMs)} ms: ${JSON.stringify(bytes.toString("latin1"))}`))
        }, scaled(waitMs))
        waiters.add(check)
        check()
      }),
    close: () => socket.destroy()
  }
}

/** A request head as raw text; `Connection: close` is added unless the headers name Connection. */
export const rawRequestHead = (method: string, target: string, headers: ReadonlyArray<[string, string]>): string => {
  const all = headers.some(([name]) => name.toLowerCase() === "connection") ? headers : [...headers, ["Connection", "close"] as [string, string]]
  return `${method} ${target} HTTP/1.1\r\n${all.map(([name, value]) => `${name}: ${value}\r\n`).join("")}\r\n`
}

/** A WebSocket upgrade request head, raw. */
export const rawUpgradeHead = (target: string, extra: ReadonlyArray<[string, string]> = []): string =>
  rawRequestHead("GET", target, [
    ["Host", "client.example"],
    ["Connection", "Upgrade"],
    ["Upgrade", "websocket"],
    ["Sec-WebSocket-Version", "13"],
    ["Sec-WebSocket-Key", randomBytes(16).toString("base64")],
    ...extra
  ])
