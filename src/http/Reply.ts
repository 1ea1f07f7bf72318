// Writes Pinboard's own responses: catalogue rows and registry API answers.
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http"
import { APPLICATION_JSON, retryAfterSeconds, type Reply } from "../Errors.js"
import { withCors } from "../proxy/Headers.js"

/** Methods that read: probes and registry reads take both, and HEAD gets no body. */
export const isReadMethod = (method: string | undefined): boolean => method === "GET" || method === "HEAD"

const send = (req: IncomingMessage, res: ServerResponse, status: number, headers: OutgoingHttpHeaders, body?: string): void => {
  if (body !== undefined) headers["content-length"] = Buffer.byteLength(body)
  res.writeHead(status, withCors(headers, req.headers.origin))
  res.end(req.method === "HEAD" ? undefined : body)
}

export const writeReply = (req: IncomingMessage, res: ServerResponse, reply: Reply): void => {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const headers: OutgoingHttpHeaders = reply.contentType === undefined ? {} : { "content-type": reply.contentType }
  if (reply.retryAfterMs !== undefined) headers["retry-after"] = String(retryAfterSeconds(reply.retryAfterMs))
  send(req, res, reply.status, headers, reply.body)
}

export const writeJson = (req: IncomingMessage, res: ServerResponse, status: number, json: unknown): void =>
  json === undefined ? send(req, res, status, {}) : send(req, res, status, { "content-type": APPLICATION_JSON }, JSON.stringify(json))
