// Sending inputs and reading what comes back: raw TCP sockets for anything that may be
// malformed HTTP (or a client that stops part-way), node:http for well-formed requests on
// keep-alive connections. Both report an Observation: the responses parsed off the wire,
// whether the server closed or reset, and whether it hung (never answered nor closed).
import http from "node:http"
import net from "node:net"

export interface Response {
  readonly status: number
  readonly reason: string
  /** Lowercased name, value, in wire order. */
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly body: Buffer
  /** False when the connection ended before the body's framing said it was over. */
  readonly complete: boolean
  /** No Content-Length and no chunked framing: the body ran to the close (bare status lines, Node's rejections). */
  readonly unframed: boolean
}

export const header = (response: Response, name: string): string | undefined => response.headers.find(([n]) => n === name)?.[1]
export const headerAll = (response: Response, name: string): Array<string> =>
  response.headers.filter(([n]) => n === name).map(([, v]) => v)

export interface Observation {
  readonly responses: ReadonlyArray<Response>
  /** The server ended or reset the connection. */
  readonly closed: boolean
  /** Neither an answer nor a close within the hang limit (after the client's FIN, for raw inputs). */
  readonly hung: boolean
  /** Raw inputs: nothing came back for a while, so the client half-closed (the request may have been incomplete). */
  readonly finSent: boolean
  /** Bytes after a 101: the start of the WebSocket stream. */
  readonly afterUpgrade: Buffer
  /** A client-side failure to send (node:http refused a header value, say). */
  readonly sendError?: string
}

// ---- parsing responses --------------------------------------------------------------------

interface Parsed {
  readonly responses: Array<Response>
  readonly upgraded: boolean
  readonly rest: Buffer
  /** The last response is still arriving. */
  readonly pending: boolean
  readonly garbage?: string
}

const parseChunked = (buf: Buffer, from: number): { body: Buffer; end: number } | "incomplete" | "bad" => {
  const parts: Array<Buffer> = []
  let at = from
  for (;;) {
    const lineEnd = buf.indexOf("\r\n", at)
    if (lineEnd < 0) return "incomplete"
    const sizeText = buf.subarray(at, lineEnd).toString("latin1").split(";")[0]!.trim()
    if (!/^[0-9a-fA-F]+$/.test(sizeText)) return "bad"
    const size = parseInt(sizeText, 16)
    at = lineEnd + 2
    if (size === 0) {
      // Trailers, then an empty line.
      for (;;) {
        const trailerEnd = buf.indexOf("\r\n", at)
        if (trailerEnd < 0) return "incomplete"
        const empty = trailerEnd === at
        at = trailerEnd + 2
        if (empty) return { body: Buffer.concat(parts), end: at }
      }
    }
    if (buf.length < at + size + 2) return "incomplete"
    parts.push(buf.subarray(at, at + size))
    at += size + 2
  }
}

/** Every response in `buf` (a client sees them in order); `closed`: no more bytes will come. */
export const parseResponses = (buf: Buffer, headRequest: boolean, closed: boolean): Parsed => {
  const responses: Array<Response> = []
  let at = 0
  while (at < buf.length) {
    const headEnd = buf.indexOf("\r\n\r\n", at)
    if (headEnd < 0) {
      if (closed) return { responses, upgraded: false, rest: buf.subarray(at), pending: false, garbage: "an incomplete response head" }
      return { responses, upgraded: false, rest: buf.subarray(at), pending: true }
    }
    const lines = buf.subarray(at, headEnd).toString("latin1").split("\r\n")
    const statusMatch = lines[0]!.match(/^HTTP\/1\.[01] (\d{3})(?: (.*))?$/)
    if (!statusMatch) return { responses, upgraded: false, rest: buf.subarray(at), pending: false, garbage: `a bad status line ${JSON.stringify(lines[0]!.slice(0, 80))}` }
    const status = Number(statusMatch[1])
    const headers: Array<[string, string]> = []
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":")
      if (colon <= 0) return { responses, upgraded: false, rest: buf.subarray(at), pending: false, garbage: `a bad header line ${JSON.stringify(line.slice(0, 80))}` }
      headers.push([line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()])
    }
    const bodyStart = headEnd + 4
    const base = { status, reason: statusMatch[2] ?? "", headers }
    if (status === 101) {
      responses.push({ ...base, body: Buffer.alloc(0), complete: true, unframed: false })
      return { responses, upgraded: true, rest: buf.subarray(bodyStart), pending: false }
    }
    if (status >= 100 && status < 200) {
      at = bodyStart // interim: the final response follows
      continue
    }
    const te = headers.filter(([n]) => n === "transfer-encoding").map(([, v]) => v.toLowerCase())
    const cl = headers.find(([n]) => n === "content-length")?.[1]
    if (headRequest || status === 204 || status === 304) {
      responses.push({ ...base, body: Buffer.alloc(0), complete: true, unframed: cl === undefined && te.length === 0 })
      at = bodyStart
    } else if (te.some((v) => v.includes("chunked"))) {
      const chunked = parseChunked(buf, bodyStart)
      if (chunked === "bad") return { responses, upgraded: false, rest: buf.subarray(at), pending: false, garbage: "bad chunked framing" }
      if (chunked === "incomplete") {
        if (closed) {
          responses.push({ ...base, body: buf.subarray(bodyStart), complete: false, unframed: false })
          return { responses, upgraded: false, rest: Buffer.alloc(0), pending: false }
        }
        return { responses, upgraded: false, rest: buf.subarray(at), pending: true }
      }
      responses.push({ ...base, body: chunked.body, complete: true, unframed: false })
      at = chunked.end
    } else if (cl !== undefined) {
      const length = Number(cl)
      if (!Number.isSafeInteger(length) || length < 0) return { responses, upgraded: false, rest: buf.subarray(at), pending: false, garbage: `a bad content-length ${cl}` }
      if (buf.length < bodyStart + length) {
        if (closed) {
          responses.push({ ...base, body: buf.subarray(bodyStart), complete: false, unframed: false })
          return { responses, upgraded: false, rest: Buffer.alloc(0), pending: false }
        }
        return { responses, upgraded: false, rest: buf.subarray(at), pending: true }
      }
      responses.push({ ...base, body: buf.subarray(bodyStart, bodyStart + length), complete: true, unframed: false })
      at = bodyStart + length
    } else {
      // Unframed: the body runs to the close.
      if (!closed) return { responses, upgraded: false, rest: buf.subarray(at), pending: true }
      responses.push({ ...base, body: buf.subarray(bodyStart), complete: true, unframed: true })
      at = buf.length
    }
  }
  return { responses, upgraded: false, rest: Buffer.alloc(0), pending: false }
}

// ---- raw sockets --------------------------------------------------------------------------

export interface Part {
  readonly data: Buffer
  /** Wait this long before writing the part. */
  readonly delayMs?: number
}

export type After =
  /**
   * Read the answer; if nothing comes for a while, half-close (FIN) and wait for the close.
   * `untilClose`: every answer until the server closes (pipelined requests, the last with
   * `Connection: close`), with no FIN.
   */
  | { readonly mode: "read"; readonly untilClose?: boolean }
  /** Close (RST-free destroy) this long after the last part, whatever came back. */
  | { readonly mode: "close"; readonly afterMs: number }
  /** Close once this many bytes of the answer have arrived. */
  | { readonly mode: "close-mid-response"; readonly afterBytes: number }
  /** A WebSocket client: after the 101, `ws` drives the rest. */
  | { readonly mode: "ws"; readonly ws: WsScript }

/** After a 101: frames to send and where the client stops. */
export interface WsScript {
  /** The text to send in one masked frame (none: stop right after the 101). */
  readonly message: string | undefined
  /** After the echo: send a close frame and wait for the server's close, or just go away. */
  readonly ending: "close-frame" | "destroy" | "destroy-before-echo"
}

export interface RawOptions {
  readonly port: number
  readonly parts: ReadonlyArray<Part>
  readonly after: After
  readonly headRequest: boolean
  /** Quiet time before the client half-closes a request that got no answer. */
  readonly finAfterMs: number
  /** No answer nor close this long after the last write (FIN included): a hang. */
  readonly hangMs: number
  /** A slow reader: stop reading at the first bytes of the answer for this long. */
  readonly pauseReadingMs?: number
}

export interface WsOutcome {
  /** The payload of the first text frame the server sent back. */
  readonly echo: string | undefined
  /** A close frame (or the connection's end) came back after ours. */
  readonly closedCleanly: boolean
}

export type RawObservation = Observation & { readonly ws?: WsOutcome; readonly garbage?: string }

const maskedFrame = (opcode: number, payload: Buffer): Buffer => {
  const mask = Buffer.from([0x12, 0x34, 0x56, 0x78])
  const length = payload.length
  const head =
    length < 126
      ? Buffer.from([0x80 | opcode, 0x80 | length])
      : Buffer.from([0x80 | opcode, 0x80 | 126, length >> 8, length & 0xff])
  const body = Buffer.alloc(length)
  for (let i = 0; i < length; i++) body[i] = payload[i]! ^ mask[i % 4]!
  return Buffer.concat([head, mask, body])
}

/** The first complete unmasked frame from the server: opcode and payload. */
const serverFrame = (buf: Buffer): { opcode: number; payload: Buffer } | undefined => {
  if (buf.length < 2) return undefined
  const opcode = buf[0]! & 0x0f
  let length = buf[1]! & 0x7f
  let at = 2
  if (length === 126) {
    if (buf.length < 4) return undefined
    length = buf.readUInt16BE(2)
    at = 4
  } else if (length === 127) {
    if (buf.length < 10) return undefined
    length = Number(buf.readBigUInt64BE(2))
    at = 10
  }
  if (buf.length < at + length) return undefined
  return { opcode, payload: buf.subarray(at, at + length) }
}

export const sendRaw = (options: RawOptions): Promise<RawObservation> =>
  new Promise((resolve) => {
    const socket = net.connect(options.port, "127.0.0.1")
    socket.setNoDelay(true)
    const chunks: Array<Buffer> = []
    let received = 0
    let closed = false
    let finished = false
    let finSent = false
    let hung = false
    let written = false
    let timer: NodeJS.Timeout | undefined
    const timers: Array<NodeJS.Timeout> = []
    // WebSocket state
    let wsStage: "head" | "sent" | "closing" | "over" = "head"
    let echo: string | undefined
    let closedCleanly = false

    const buffer = () => (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks))
    const finish = () => {
      if (finished) return
      finished = true
      if (timer !== undefined) clearTimeout(timer)
      for (const t of timers) clearTimeout(t)
      socket.destroy()
      const parsed = parseResponses(buffer(), options.headRequest, true)
      resolve({
        responses: parsed.responses,
        closed,
        hung,
        finSent,
        afterUpgrade: parsed.upgraded ? parsed.rest : Buffer.alloc(0),
        ...(parsed.garbage === undefined ? {} : { garbage: parsed.garbage }),
        ...(options.after.mode === "ws" ? { ws: { echo, closedCleanly } } : {})
      })
    }
    const arm = (ms: number, then: () => void) => {
      if (timer !== undefined) clearTimeout(timer)
      timer = setTimeout(then, ms)
    }
    /** Nothing for finAfterMs: FIN; then nothing for hangMs: a hang. */
    const armRead = () =>
      arm(options.finAfterMs, () => {
        finSent = true
        socket.end()
        arm(options.hangMs, () => {
          hung = true
          finish()
        })
      })

    const onProgress = () => {
      if (finished || !written || !reading) return
      const after = options.after
      if (after.mode === "close-mid-response") {
        if (received >= after.afterBytes) finish()
        return
      }
      if (after.mode === "close") return
      const parsed = parseResponses(buffer(), options.headRequest, false)
      if (after.mode === "ws" && parsed.upgraded) return onWs(after.ws, parsed.rest)
      if (parsed.upgraded) {
        // An upgrade the input did not plan for: the tunnel is open, nothing more to see.
        arm(25, finish)
        return
      }
      if (parsed.garbage !== undefined) return finish()
      if (after.mode === "read" && after.untilClose === true) {
        arm(options.hangMs, () => {
          hung = true
          finish()
        })
        return
      }
      if (parsed.responses.length > 0 && !parsed.pending && !parsed.upgraded) {
        // A complete answer: give pipelined leftovers a moment, then go.
        arm(25, finish)
        return
      }
      if (after.mode === "read" || after.mode === "ws") {
        if (!finSent) armRead()
      }
    }

    const onWs = (script: WsScript, rest: Buffer) => {
      if (wsStage === "head") {
        if (script.message === undefined) return finish()
        wsStage = "sent"
        socket.write(maskedFrame(0x1, Buffer.from(script.message)))
        if (script.ending === "destroy-before-echo") return finish()
        arm(options.hangMs, () => {
          hung = true
          finish()
        })
        return
      }
      const frame = serverFrame(rest)
      if (wsStage === "sent" && frame !== undefined) {
        echo = frame.opcode === 0x1 ? frame.payload.toString() : `<opcode ${frame.opcode}>`
        if (script.ending === "destroy") return finish()
        wsStage = "closing"
        socket.write(maskedFrame(0x8, Buffer.from([0x03, 0xe8])))
        arm(options.hangMs, () => {
          hung = true
          finish()
        })
        return
      }
      if (wsStage === "closing" && frame !== undefined) {
        // The echo again (still in `rest`), then the close frame.
        const afterEcho = rest.subarray(frameLength(rest))
        const close = serverFrame(afterEcho)
        if (close !== undefined && close.opcode === 0x8) {
          closedCleanly = true
          wsStage = "over"
          finish()
        }
      }
    }

    let paused = false
    let reading = true
    socket.on("data", (chunk: Buffer) => {
      if (options.pauseReadingMs !== undefined && !paused) {
        // The client is not reading: no timer of ours runs meanwhile.
        paused = true
        reading = false
        socket.pause()
        if (timer !== undefined) clearTimeout(timer)
        timers.push(
          setTimeout(() => {
            reading = true
            socket.resume()
            onProgress()
          }, options.pauseReadingMs)
        )
      }
      chunks.push(chunk)
      received += chunk.length
      if (chunks.length > 64) chunks.splice(0, chunks.length, Buffer.concat(chunks))
      onProgress()
    })
    socket.on("end", () => {
      closed = true
      if (wsStage === "closing") closedCleanly = true
      finish()
    })
    socket.on("error", () => {
      closed = true
      finish()
    })
    socket.on("close", () => {
      closed = true
      finish()
    })

    // Parts go out one after another, each timer set once the previous part is written: timers
    // of different durations set at once may fire out of order when the event loop runs late.
    const writePart = (i: number) => {
      if (finished || socket.destroyed) return
      const part = options.parts[i]!
      socket.write(part.data)
      if (i < options.parts.length - 1) {
        const delay = options.parts[i + 1]!.delayMs ?? 0
        if (delay === 0) writePart(i + 1)
        else timers.push(setTimeout(() => writePart(i + 1), delay))
        return
      }
      written = true
      const after = options.after
      if (after.mode === "close") {
        timers.push(setTimeout(finish, after.afterMs))
      } else if (after.mode === "close-mid-response") {
        arm(options.hangMs, () => {
          hung = received === 0 && !closed
          finish()
        })
        onProgress()
      } else if (after.mode === "read" && after.untilClose === true) {
        arm(options.hangMs, () => {
          hung = true
          finish()
        })
        onProgress()
      } else {
        armRead()
        onProgress()
      }
    }
    socket.once("connect", () => {
      const first = options.parts[0]?.delayMs ?? 0
      if (first === 0) writePart(0)
      else timers.push(setTimeout(() => writePart(0), first))
    })
  })

const frameLength = (buf: Buffer): number => {
  let length = buf[1]! & 0x7f
  let at = 2
  if (length === 126) {
    length = buf.readUInt16BE(2)
    at = 4
  } else if (length === 127) {
    length = Number(buf.readBigUInt64BE(2))
    at = 10
  }
  return at + length
}

// ---- node:http ----------------------------------------------------------------------------

export interface HttpRequest {
  readonly method: string
  readonly path: string
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly body?: Buffer
}

/** Keep-alive connections shared by the well-formed inputs and the control requests. */
export const agent = new http.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16 })

/** `fresh`: on a connection of its own rather than a kept-alive one. */
export const sendHttp = (port: number, request: HttpRequest, hangMs: number, fresh = false): Promise<Observation> =>
  new Promise((resolve) => {
    let settled = false
    const done = (observation: Observation) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(observation)
    }
    const nothing = { responses: [], afterUpgrade: Buffer.alloc(0), finSent: false }
    let req: http.ClientRequest
    try {
      const headers: Array<string> = []
      for (const [name, value] of request.headers) headers.push(name, value)
      const framed = request.headers.some(([n]) => n.toLowerCase() === "content-length" || n.toLowerCase() === "transfer-encoding")
      if (request.body !== undefined && !framed) {
        headers.push("Content-Length", String(request.body.length))
      }
      req = http.request({ host: "127.0.0.1", port, method: request.method, path: request.path, headers, agent: fresh ? false : agent })
    } catch (error) {
      return done({ ...nothing, closed: false, hung: false, sendError: (error as Error).message })
    }
    const timer = setTimeout(() => {
      req.destroy(new Error("hang"))
      done({ ...nothing, closed: false, hung: true })
    }, hangMs)
    req.on("error", (error) => done({ ...nothing, closed: true, hung: false, sendError: error.message }))
    req.on("response", (res) => {
      const body: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => body.push(chunk))
      const headers: Array<[string, string]> = []
      for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) headers.push([res.rawHeaders[i]!.toLowerCase(), res.rawHeaders[i + 1]!])
      const framed = res.headers["content-length"] !== undefined || res.headers["transfer-encoding"] !== undefined
      const respond = (complete: boolean) =>
        done({
          responses: [
            { status: res.statusCode ?? 0, reason: res.statusMessage ?? "", headers, body: Buffer.concat(body), complete, unframed: !framed }
          ],
          closed: !complete,
          hung: false,
          finSent: false,
          afterUpgrade: Buffer.alloc(0)
        })
      res.on("end", () => respond(true))
      res.on("aborted", () => respond(false))
      res.on("error", () => respond(false))
    })
    req.end(request.body)
  })
