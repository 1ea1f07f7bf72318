// What goes over the wire in end-to-end tests: one request per connection through node:http,
// with raw header lists, and raw sockets for what node:http would not send or would hide.
import { randomBytes } from "node:crypto"
import http, { type IncomingHttpHeaders, type OutgoingHttpHeaders } from "node:http"
import net from "node:net"
import type { Pinboard } from "./Fleet.js"

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
  readonly body?: string | Buffer
  readonly timeoutMs?: number
}

/** One request on its own connection; `path` is sent byte for byte (nothing normalized). */
export const request = (pinboard: Pinboard | { readonly port: number }, path: string, options: RequestOptions = {}): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const pairs: Array<[string, string]> = Array.isArray(options.headers)
      ? [...(options.headers as Array<[string, string]>)]
      : Object.entries(options.headers ?? {}).map(([name, value]) => [name, String(value)])
    // node:http sends a DELETE/OPTIONS body unframed unless it is sized.
    if (options.body !== undefined && !pairs.some(([name]) => name.toLowerCase() === "content-length")) {
      pairs.push(["Content-Length", String(Buffer.byteLength(options.body))])
    }
    const headers = pairs.flat()
    const req = http.request({
      host: "127.0.0.1",
      port: pinboard.port,
      method: options.method ?? "GET",
      path: path.startsWith("/") ? path : `/${path}`,
      agent: false,
      headers
    })
    req.setTimeout(options.timeoutMs ?? 10_000, () => req.destroy(new Error(`no answer to ${path} in time`)))
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
    req.end(options.body)
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
 * connection, or `waitMs` passes (then the client closes it).
 */
export const rawExchange = (port: number, data: string | Buffer, waitMs = 5000): Promise<RawExchange> =>
  new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    let closed = false
    const timer = setTimeout(() => socket.destroy(), waitMs)
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
  /** False when a chunked or sized body ended early. */
  readonly complete: boolean
}

/** Parses one HTTP/1.1 response (chunked, sized, or up to the close). */
export const parseResponse = (bytes: Buffer): RawResponse => {
  const end = bytes.indexOf("\r\n\r\n")
  if (end < 0) throw new Error(`no complete response head in ${JSON.stringify(bytes.toString("latin1"))}`)
  const [statusLine, ...lines] = bytes.subarray(0, end).toString("latin1").split("\r\n")
  const rawHeaders = lines.flatMap((line) => {
    const colon = line.indexOf(":")
    return [line.slice(0, colon), line.slice(colon + 1).trim()]
  })
  const status = Number(statusLine!.split(" ")[1])
  let rest = bytes.subarray(end + 4)
  const chunked = headerTokens(rawHeaders, "transfer-encoding").includes("chunked")
  const length = headerValues(rawHeaders, "content-length")[0]
  if (chunked) {
    const parts: Array<Buffer> = []
    for (;;) {
      const lineEnd = rest.indexOf("\r\n")
      if (lineEnd < 0) return { statusLine: statusLine!, status, rawHeaders, body: Buffer.concat(parts), complete: false }
      const size = parseInt(rest.subarray(0, lineEnd).toString("latin1"), 16)
      if (size === 0) return { statusLine: statusLine!, status, rawHeaders, body: Buffer.concat(parts), complete: true }
      const chunk = rest.subarray(lineEnd + 2, lineEnd + 2 + size)
      parts.push(chunk)
      if (chunk.length < size) return { statusLine: statusLine!, status, rawHeaders, body: Buffer.concat(parts), complete: false }
      rest = rest.subarray(lineEnd + 2 + size + 2)
    }
  }
  if (length !== undefined) {
    const body = rest.subarray(0, Number(length))
    return { statusLine: statusLine!, status, rawHeaders, body, complete: body.length === Number(length) }
  }
  return { statusLine: statusLine!, status, rawHeaders, body: rest, complete: true }
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
