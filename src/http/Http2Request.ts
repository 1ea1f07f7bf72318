// An HTTP/2 request as node:http would have parsed the same request from an HTTP/1.1 client
// (docs/deploy.md "HTTP/2"), so that every step after this one, and the worker, see no
// difference. RFC 9113 8.3.1: `:authority` is the Host (two that differ are two Hosts, which
// RFC 9112 refuses); the pseudo-header fields leave the header lists, `:method` and `:path`
// kept as the request's `method` and `url`. A body has no framing header in HTTP/2: one
// without a Content-Length is read as chunked.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http"
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2"

/** Rewrites `req`'s headers and raw headers in place. */
const normalize = (req: Http2ServerRequest): void => {
  const headers = req.headers as IncomingHttpHeaders & Record<string, string | Array<string> | undefined>
  const authority = headers[":authority"]
  // node:http2 reads both from the pseudo-header fields: kept on the request before those go.
  Object.defineProperties(req, { method: { value: req.method, writable: true }, url: { value: req.url, writable: true } })
  for (const name in headers) if (name.charCodeAt(0) === 0x3a) delete headers[name]
  const raw: Array<string> = []
  const given = req.rawHeaders
  for (let i = 0; i < given.length; i += 2) if (given[i]!.charCodeAt(0) !== 0x3a) raw.push(given[i]!, given[i + 1]!)
  if (typeof authority === "string" && authority !== headers.host) {
    raw.push("host", authority)
    headers.host ??= authority
  }
  if (headers["content-length"] === undefined && !req.stream.endAfterHeaders) {
    headers["transfer-encoding"] = "chunked"
    raw.push("transfer-encoding", "chunked")
  }
  given.length = 0
  given.push(...raw)
}

/**
 * The stream's request and response, for the handler written for node:http: the compatibility
 * API gives every member that handler uses (headers, url, method, the body as a Readable,
 * writeHead, write with 'drain', addTrailers, 'close').
 */
export const asHttp1Exchange = (req: Http2ServerRequest, res: Http2ServerResponse): { readonly req: IncomingMessage; readonly res: ServerResponse } => {
  normalize(req)
  return { req: req as unknown as IncomingMessage, res: res as unknown as ServerResponse }
}
