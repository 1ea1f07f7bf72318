// Why a forward got no response headers from its worker: the `reason` of a `502 bad gateway` in
// the access log and the debug log (docs/operations.md). Pure over the error the connection or
// undici reported.

interface Reported {
  readonly name?: unknown
  readonly code?: unknown
}

const reported = (failure: unknown): Reported => (typeof failure === "object" && failure !== null ? failure : {})

const codeOf = (failure: unknown): string | undefined => {
  const code = reported(failure).code
  return typeof code === "string" ? code : undefined
}

const withCode = (what: string, code: string | undefined): string => (code === undefined ? what : `${what} (${code})`)

/** Nothing reached the worker: the TCP connect failed or ran out of time. */
export const connectFailureReason = (failure: unknown, timedOut: boolean): string => {
  if (timedOut) return "connect timeout"
  const code = codeOf(failure)
  return code === "ECONNREFUSED" ? "connect refused" : withCode("connect failed", code)
}

/** Connected, then no usable head: the worker went away, or sent one undici could not read. */
export const headersFailureReason = (failure: unknown): string => {
  const code = codeOf(failure)
  if (code === "UND_ERR_HEADERS_OVERFLOW") return "header overflow"
  if (reported(failure).name === "HTTPParserError" || code?.startsWith("HPE_") === true) return "parse error"
  if (code === "UND_ERR_SOCKET" || code === "ECONNRESET" || code === "EPIPE") return "reset before headers"
  return withCode("failed before headers", code)
}
