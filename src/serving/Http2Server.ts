// HTTP/2 to clients (docs/deploy.md "HTTP/2"): a node:http2 server that listens on no port of
// its own. The data-plane listener hands it the connections that chose HTTP/2 (serving/
// Http2Handoff.ts) and it serves their streams with the HTTP/1.1 requests' handler, through
// node:http2's compatibility API. Per connection: the SETTINGS limits, the keep-alive timeout
// once no stream is open, a bound on streams cancelled before their answer (the 2023 "rapid
// reset"), and GOAWAY when Pinboard drains.
import http2, { type Http2ServerRequest, type Http2ServerResponse, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2"
import type { Socket } from "node:net"

export interface Http2Limits {
  readonly maxConcurrentStreams: number
  /** RFC 9113 6.5.2; a larger request is reset with ENHANCE_YOUR_CALM before it is read. */
  readonly maxHeaderListSize: number
  /** Streams a client may end before their answer began, at once and then per second. */
  readonly streamResetBurst: number
  readonly streamResetRate: number
  /** A connection with no open stream this long is closed (GOAWAY), as an idle HTTP/1.1 one. */
  readonly idleTimeoutMs: number
}

/** How long a connection told GOAWAY for a reset flood is still read before it is closed (nginx's lingering close). */
const LINGER_MS = 1_000

/** Node's own limit for HTTP/1.1 (`maxHeadersCount`), not its HTTP/2 default of 128 fields. */
const MAX_HEADER_FIELDS = 2000

/**
 * Streams cancelled before their answer, as a token bucket: `burst` at once, refilled at
 * `rate` per second. Every such stream has cost a resolve and maybe a forward, and freed its
 * slot under the concurrency limit at once, which is what the attack uses.
 */
export class ResetBudget {
  private tokens: number
  private at: number

  constructor(
    private readonly burst: number,
    private readonly rate: number,
    now: number
  ) {
    this.tokens = burst
    this.at = now
  }

  /** Spends one cancelled stream at `now` (ms); false once the budget is overdrawn. */
  spend(now: number): boolean {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) / 1000) * this.rate)
    this.at = now
    this.tokens -= 1
    return this.tokens >= 0
  }
}

export interface Http2Events {
  /** While Pinboard drains, a connection that opens a stream is told GOAWAY after it. */
  readonly draining: () => boolean
  /** A connection went past its reset budget and was closed. */
  readonly resetFlood: (peer: string | undefined) => void
}

export interface Http2Connections {
  /** Serves a connection that chose HTTP/2 (its first bytes may wait in its buffer). */
  readonly accept: (socket: Socket) => void
  /** GOAWAY on every connection: open streams finish, no new one starts. */
  readonly closeAll: () => void
  /** Ends every connection now. */
  readonly destroyAll: () => void
}

type StreamHandler = (req: Http2ServerRequest, res: Http2ServerResponse) => void

export const makeHttp2Connections = (limits: Http2Limits, handler: StreamHandler, onConnect: StreamHandler, events: Http2Events): Http2Connections => {
  const server = http2.createServer({
    settings: { maxConcurrentStreams: limits.maxConcurrentStreams, maxHeaderListSize: limits.maxHeaderListSize },
    maxHeaderListPairs: MAX_HEADER_FIELDS
  })
  server.on("request", handler)
  server.on("connect", onConnect)
  const sessions = new Set<ServerHttp2Session>()

  server.on("session", (session: ServerHttp2Session) => {
    sessions.add(session)
    const budget = new ResetBudget(limits.streamResetBurst, limits.streamResetRate, performance.now())
    let open = 0
    let flooded = false
    let idle: ReturnType<typeof setTimeout> | undefined
    const waitIdle = () => {
      idle = setTimeout(() => session.close(), limits.idleTimeoutMs)
      idle.unref()
    }
    waitIdle()
    session.on("stream", (stream: ServerHttp2Stream) => {
      if (open++ === 0) clearTimeout(idle)
      if (events.draining()) session.close()
      stream.once("close", () => {
        if (!flooded && !stream.headersSent && !session.destroyed && !budget.spend(performance.now())) {
          flooded = true
          events.resetFlood(session.socket?.remoteAddress)
          // GOAWAY, then the end a little later: a socket closed while the client still sends is
          // reset, and the reset can discard the GOAWAY before the client reads it.
          session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM)
          setTimeout(() => session.destroy(), LINGER_MS).unref()
        }
        if (--open === 0 && !session.closed) waitIdle()
      })
    })
    session.on("error", () => session.destroy())
    session.once("close", () => {
      clearTimeout(idle)
      sessions.delete(session)
    })
  })

  return {
    accept: (socket) => void server.emit("connection", socket),
    closeAll: () => {
      for (const session of sessions) session.close()
    },
    destroyAll: () => {
      for (const session of sessions) session.destroy()
    }
  }
}
