// Writes Pinboard's own responses: catalogue rows and registry API answers.
import type { IncomingMessage, ServerResponse } from "node:http"
import { APPLICATION_JSON, retryAfterSeconds, type Reply } from "../Errors.js"

/** The seed's CORS rule, which also covers Pinboard's own responses. */
const corsHeaders = (req: IncomingMessage): Record<string, string> => {
  const origin = req.headers.origin
  return origin === undefined ? {} : { "access-control-allow-origin": origin, vary: "origin" }
}

export const writeReply = (req: IncomingMessage, res: ServerResponse, reply: Reply): void => {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const headers: Record<string, string | number> = {
    "content-type": reply.contentType,
    "content-length": Buffer.byteLength(reply.body),
    ...corsHeaders(req)
  }
  if (reply.retryAfterMs !== undefined) headers["retry-after"] = retryAfterSeconds(reply.retryAfterMs)
  res.writeHead(reply.status, headers)
  res.end(req.method === "HEAD" ? undefined : reply.body)
}

export const writeJson = (req: IncomingMessage, res: ServerResponse, status: number, json: unknown): void => {
  if (json === undefined) {
    res.writeHead(status, corsHeaders(req))
    res.end()
    return
  }
  const body = JSON.stringify(json)
  res.writeHead(status, { "content-type": APPLICATION_JSON, "content-length": Buffer.byteLength(body), ...corsHeaders(req) })
  res.end(req.method === "HEAD" ? undefined : body)
}
