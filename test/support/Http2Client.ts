// One request on an HTTP/2 connection with node:http2's client, its answer read whole: what
// the HTTP/2 end-to-end tests send where test/support/Wire.ts sends HTTP/1.1.
import http2, { type ClientHttp2Session, type IncomingHttpHeaders, type IncomingHttpStatusHeader, type OutgoingHttpHeaders } from "node:http2"
import { scaled } from "./Time.js"

export interface H2Answer {
  readonly status: number
  readonly headers: IncomingHttpHeaders & IncomingHttpStatusHeader
  readonly text: string
  readonly trailers: IncomingHttpHeaders | undefined
}

export interface H2RequestOptions {
  readonly method?: string
  readonly headers?: OutgoingHttpHeaders
  readonly body?: string | Buffer
  readonly timeoutMs?: number
}

/**
 * A session to `url` (http:// is h2c with prior knowledge; https:// takes `ca`), once the
 * server's SETTINGS are in; closed by the caller.
 */
export const h2Connect = (url: string, options: http2.SecureClientSessionOptions = {}): Promise<ClientHttp2Session> =>
  new Promise((resolve, reject) => {
    const session = http2.connect(url, options)
    session.once("remoteSettings", () => {
      session.off("error", reject)
      session.on("error", () => undefined)
      resolve(session)
    })
    session.once("error", reject)
  })

export const h2Request = (session: ClientHttp2Session, path: string, options: H2RequestOptions = {}): Promise<H2Answer> =>
  new Promise((resolve, reject) => {
    const stream = session.request({ ":method": options.method ?? "GET", ":path": path, ...options.headers }, { endStream: options.body === undefined })
    let headers: H2Answer["headers"] = {}
    let trailers: IncomingHttpHeaders | undefined
    const chunks: Array<Buffer> = []
    stream.setTimeout(scaled(options.timeoutMs ?? 10_000), () => stream.close(http2.constants.NGHTTP2_CANCEL))
    stream.on("response", (received) => (headers = received))
    stream.on("trailers", (received) => (trailers = received))
    stream.on("data", (chunk: Buffer) => chunks.push(chunk))
    stream.on("end", () => resolve({ status: Number(headers[":status"]), headers, text: Buffer.concat(chunks).toString(), trailers }))
    stream.on("close", () => {
      if (stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) reject(new Error(`stream ${path} reset with code ${stream.rstCode}`))
    })
    stream.on("error", reject)
    if (options.body !== undefined) stream.end(options.body)
  })
