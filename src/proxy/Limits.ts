// A forward's fixed limits (docs/proxy.md "Limits"). Connect, response headers and
// body idle run on Clock (Deadlines.ts), so a TestClock drives them; none is an option but
// the header wait (`forwards.timeoutMs`).

/** TCP connect to a worker. */
export const CONNECT_TIMEOUT_MS = 5_000
/** No data from the worker on a streamed response body for this long ends the exchange. */
export const BODY_IDLE_MS = 60_000
/** Dead-peer detection on both sockets of a WebSocket tunnel. */
export const TUNNEL_KEEPALIVE_MS = 30_000

/** The limits of one forward; `headersMs` is `forwards.timeoutMs`. */
export interface ForwardLimits {
  readonly connectMs: number
  readonly headersMs: number
  readonly bodyIdleMs: number
}

export const forwardLimits = (headersTimeoutMs: number): ForwardLimits => ({
  connectMs: CONNECT_TIMEOUT_MS,
  headersMs: headersTimeoutMs,
  bodyIdleMs: BODY_IDLE_MS
})
