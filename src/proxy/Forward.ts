// Streams one request to its worker and the response back (seed "Request body", "Response").
import http, { type IncomingMessage, type ServerResponse } from "node:http"
import https from "node:https"
import { Effect } from "effect"
import { formatAddress, type Address } from "../Address.js"
import { BadGateway } from "../Errors.js"
import type { Placement } from "../registry/Registry.js"
import { forwardRequestHeaders, peerAddress, relayResponseHeaders } from "./Headers.js"

const agents = {
  "http:": new http.Agent({ keepAlive: true }),
  "https:": new https.Agent({ keepAlive: true })
}

interface Upstream {
  readonly base: URL
  readonly prefix: string
}

/** advertiseUrls parsed once; few and long-lived (one per worker), so a small cap suffices. */
const upstreams = new Map<string, Upstream>()
const MAX_CACHED_UPSTREAMS = 4096

const upstreamOf = (advertiseUrl: string): Upstream => {
  let upstream = upstreams.get(advertiseUrl)
  if (upstream === undefined) {
    if (upstreams.size >= MAX_CACHED_UPSTREAMS) upstreams.clear()
    const base = new URL(advertiseUrl)
    upstream = { base, prefix: base.pathname.endsWith("/") ? base.pathname.slice(0, -1) : base.pathname }
    upstreams.set(advertiseUrl, upstream)
  }
  return upstream
}

/** advertiseUrl (with its path prefix) plus the raw path and query, byte for byte (DESIGN 9). */
const targetOf = (advertiseUrl: string, address: Address) => {
  const { base, prefix } = upstreamOf(advertiseUrl)
  return { base, path: `${prefix}${formatAddress(address)}` }
}

export const forward = (req: IncomingMessage, res: ServerResponse, address: Address, placement: Placement) =>
  Effect.async<void, BadGateway>((resume) => {
    const { base, path } = targetOf(placement.advertiseUrl, address)
    const client = base.protocol === "https:" ? https : http
    const upstream = client.request({
      protocol: base.protocol,
      hostname: base.hostname,
      port: base.port,
      method: req.method,
      path,
      agent: agents[base.protocol as "http:" | "https:"],
      headers: forwardRequestHeaders(req.headers, { epoch: placement.epoch, peer: peerAddress(req.socket.remoteAddress) })
    })
    upstream.on("response", (response) => {
      res.writeHead(response.statusCode ?? 502, relayResponseHeaders(response.headers, req.headers.origin))
      response.pipe(res)
      response.on("error", () => res.destroy())
    })
    // Done, or the client went away: then the upstream exchange is abandoned too.
    res.on("close", () => {
      if (!res.writableFinished) upstream.destroy()
      resume(Effect.void)
    })
    upstream.on("error", (cause) => {
      if (res.headersSent) {
        res.destroy()
        resume(Effect.void)
      } else resume(Effect.fail(new BadGateway({ cause })))
    })
    req.pipe(upstream)
    return Effect.sync(() => upstream.destroy())
  })
