// Why a call to Redis failed, in one line an operator can act on (docs/operations.md "Logs"):
// the server's error (WRONGPASS, NOPERM, CLUSTERDOWN), the TLS error, the socket error with its
// address. `kind` is the bounded label the metrics count by; `reason` the text logs and /readyz
// show. Pure: the tracker (RedisHealth.ts) keeps the state.

export type RedisFailureKind = "refused" | "timeout" | "closed" | "auth" | "permission" | "tls" | "dns" | "cluster" | "sentinel" | "other"

export interface RedisFailure {
  readonly kind: RedisFailureKind
  readonly reason: string
}

const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|HOSTNAME_MISMATCH|EPROTO)/

const fieldOf = (error: unknown, field: string): string | undefined => {
  const value = typeof error === "object" && error !== null ? (error as Record<string, unknown>)[field] : undefined
  return typeof value === "string" ? value : undefined
}

/** The error's own words: its message, on one line and not too long (a command's arguments never). */
const messageOf = (error: unknown): string => {
  const text = error instanceof Error ? error.message : typeof error === "string" ? error : String(fieldOf(error, "message") ?? error)
  const line = text.replaceAll(/\s+/g, " ").trim()
  return line.length > 300 ? `${line.slice(0, 300)}...` : line
}

/** A Cluster client that knows no master yet: its connection's error, if any, says why. */
export const NO_MASTER_KNOWN = "no master of the Redis Cluster is known yet"

/** What a failure says when it is only the sign of a connection down (ioredis's own words, and ours). */
const CONNECTION_DOWN = /Stream isn't writeable|Connection is closed|enableOfflineQueue|Reached the max retries per request|no master of the Redis Cluster is known/

/** Whether a failure only says the connection is down, not why. */
export const isConnectionDown = (error: unknown): boolean => CONNECTION_DOWN.test(messageOf(error))

const kindOf = (code: string, message: string): RedisFailureKind => {
  if (/^(WRONGPASS|NOAUTH)\b|invalid password|AUTH failed/i.test(message)) return "auth"
  if (/^NOPERM\b/.test(message)) return "permission"
  if (TLS_CODES.test(code) || /certificate|SSL routines|TLS/i.test(message)) return "tls"
  if (code === "ECONNREFUSED") return "refused"
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return "dns"
  if (code === "ETIMEDOUT" || /timed out|timeout/i.test(message)) return "timeout"
  if (/sentinel/i.test(message)) return "sentinel"
  if (/^(CLUSTERDOWN|MOVED|ASK|TRYAGAIN)\b|slots cache|startup nodes|cluster/i.test(message)) return "cluster"
  if (code === "ECONNRESET" || code === "EPIPE" || CONNECTION_DOWN.test(message)) return "closed"
  return "other"
}

/**
 * A failed call described. `connectionError` is the connection's last error, if any: when the
 * call only says the connection is down, that error is why.
 */
export const describeRedisFailure = (cause: unknown, connectionError?: unknown): RedisFailure => {
  // Promise.any over a Cluster's masters (the time sample): the first master's error says why.
  if (cause instanceof AggregateError && cause.errors.length > 0) return describeRedisFailure(cause.errors[0], connectionError)
  const message = messageOf(cause)
  if (connectionError !== undefined && CONNECTION_DOWN.test(message)) return describeRedisFailure(connectionError)
  const code = fieldOf(cause, "code") ?? ""
  return { kind: kindOf(code, message), reason: message === "" ? code || "unknown error" : message }
}
