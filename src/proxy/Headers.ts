// Request and response header rules (docs/proxy.md "Forwarding"), pure.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http"
import { ATTESTATION_HEADER, EPOCH_HEADER, isPinboardHeader, LEASE_UNHEALTHY, REFUSAL_HEADER } from "../contract/Headers.js"
import { TRACEPARENT_HEADER } from "../contract/TraceParent.js"
import { plainAddress } from "../serving/TrustedProxies.js"

/** Headers as node:http and undici hand them over: lowercase names. */
type HeaderMap = Readonly<Record<string, string | Array<string> | undefined>>

// `http2-settings` belongs to an h2c upgrade offer, which Pinboard declines (RFC 9113 3.2.1:
// connection-specific), whether or not `Connection` names it.
const HOP_BY_HOP = new Set(["connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "http2-settings"])

const isFixedHopByHop = (name: string): boolean => HOP_BY_HOP.has(name) || name.startsWith("proxy-")

/** Hop-by-hop names: the fixed list, `proxy-*`, and any named in `Connection`. */
const hopByHop = (headers: HeaderMap): ((name: string) => boolean) => {
  // The common values name nothing beyond the fixed list.
  const connection = headers.connection
  if (connection === undefined || connection === "keep-alive" || connection === "close") return isFixedHopByHop
  const listed = new Set(
    // Stryker disable next-line MethodExpression: equivalent, no header field has an empty name (docs/reliability.md "Mutation testing")
    String(connection)
      .split(",")
      .map((name) => name.trim().toLowerCase())
      .filter((name) => name !== "")
  )
  return (name) => isFixedHopByHop(name) || listed.has(name)
}

export const forwardRequestHeaders = (
  headers: IncomingHttpHeaders,
  added: {
    readonly epoch: string
    readonly peer: string
    readonly attestation: string
    /** Pinboard's span, when the request is traced: it replaces the client's (docs/operations.md "Traces"). */
    readonly traceparent?: string | undefined
  }
): OutgoingHttpHeaders => {
  const drop = hopByHop(headers)
  const out: OutgoingHttpHeaders = {}
  for (const name in headers) {
    // `expect`: node:http has already answered `100 Continue` to the client.
    if (drop(name) || name === "host" || name === "x-forwarded-for" || name === "expect" || name.startsWith("pinboard-")) continue
    out[name] = headers[name]
  }
  out["x-forwarded-for"] = added.peer
  out[EPOCH_HEADER] = added.epoch
  out[ATTESTATION_HEADER] = added.attestation
  if (added.traceparent !== undefined) out[TRACEPARENT_HEADER] = added.traceparent
  return out
}

export const relayResponseHeaders = (headers: HeaderMap, origin: string | undefined): OutgoingHttpHeaders => {
  const drop = hopByHop(headers)
  const out: OutgoingHttpHeaders = {}
  for (const name in headers) {
    if (drop(name) || isPinboardHeader(name)) continue
    out[name] = headers[name]
  }
  out["x-accel-buffering"] = "no"
  return withCors(out, origin)
}

/**
 * A chunked response's trailer fields, relayed as the worker sent them less the hop-by-hop and
 * `Pinboard-*` names the headers lose; undefined when there are none (the common case).
 */
export const relayTrailers = (trailers: HeaderMap): OutgoingHttpHeaders | undefined => {
  let out: OutgoingHttpHeaders | undefined
  for (const name in trailers) {
    if (isFixedHopByHop(name) || isPinboardHeader(name)) continue
    if (out === undefined) out = {}
    out[name] = trailers[name]
  }
  return out
}

/** The in-band refusal (docs/proxy.md "Retries"): `503` with `Pinned-Refusal: lease-unhealthy`. */
export const isRefusal = (status: number, headers: HeaderMap): boolean =>
  // Stryker disable next-line StringLiteral: equivalent, an absent header read as any text but lease-unhealthy is no refusal
  status === 503 && String(headers[REFUSAL_HEADER] ?? "").trim().toLowerCase() === LEASE_UNHEALTHY

/**
 * The CORS rule (docs/proxy.md "Forwarding"), for worker responses and Pinboard's own alike: a request with an
 * `Origin` whose response has no `Access-Control-Allow-Origin` gets it, and `Vary: origin`.
 */
export const withCors = (headers: OutgoingHttpHeaders, origin: string | undefined): OutgoingHttpHeaders => {
  if (origin !== undefined && headers["access-control-allow-origin"] === undefined) {
    headers["access-control-allow-origin"] = origin
    headers["vary"] = headers["vary"] === undefined ? "origin" : `${String(headers["vary"])}, origin`
  }
  return headers
}

/** The observed peer; an IPv4-mapped IPv6 address is written as IPv4 (docs/protocol.md "Resolution"). */
export const peerAddress = (remote: string | undefined): string => (remote === undefined ? "" : plainAddress(remote))
