// The fixed limits of the seed's "Limits" and DESIGN 2: not options. Tests reach them
// through a TestClock, never through configuration.

/** TCP connect to a worker. */
export const CONNECT_TIMEOUT_MS = 5_000
/** No data from the worker on a streamed response body for this long ends the exchange. */
export const BODY_IDLE_MS = 60_000
/** More than this between resolve and send: the placement is resolved again. */
export const RE_RESOLVE_AFTER_MS = 5_000
export const MAX_RE_RESOLVES = 2
/** Dead-peer detection on both sockets of a WebSocket tunnel. */
export const TUNNEL_KEEPALIVE_MS = 30_000
/** Instance call depth (DESIGN 7). */
export const MAX_DEPTH = 50
