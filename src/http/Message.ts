// What RFC 9112 asks of every request before it is routed (docs/proxy.md "What every client
// gets"): exactly one `Host` line, and one on every HTTP/1.1 request (section 3.2); no transfer
// coding that Pinboard would have to decode (section 6.1). Pure over what node:http parsed.
import type { IncomingMessage } from "node:http"
import { MissingHost, RepeatedHost, TransferCodingNotImplemented } from "../Errors.js"

export type MessageError = MissingHost | RepeatedHost | TransferCodingNotImplemented

type ParsedHead = Pick<IncomingMessage, "httpVersionMajor" | "httpVersionMinor" | "rawHeaders" | "headers">

/** `Host` lines in the raw list: node:http keeps only the first in `headers`. */
const hostLines = (rawHeaders: ReadonlyArray<string>): number => {
  let count = 0
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!
    if (name.length === 4 && (name === "Host" || name === "host" || name.toLowerCase() === "host")) count++
  }
  return count
}

/** node:http decodes `chunked`, the one coding it knows, and passes any other through undecoded. */
const isChunkedOnly = (codings: string): boolean => codings === "chunked" || codings.trim().toLowerCase() === "chunked"

/**
 * Why the request cannot be served whatever its route, or undefined. HTTP/1.0 may omit `Host`:
 * hostname-aware mode then answers `MissingHost` at its own step.
 */
export const messageError = (head: ParsedHead): MessageError | undefined => {
  const hosts = hostLines(head.rawHeaders)
  if (hosts > 1) return new RepeatedHost()
  if (hosts === 0 && (head.httpVersionMajor > 1 || head.httpVersionMinor > 0)) return new MissingHost()
  const codings = head.headers["transfer-encoding"]
  if (codings !== undefined && !isChunkedOnly(codings)) return new TransferCodingNotImplemented()
  return undefined
}
