// Calls from an instance (docs/config.md): a request to another instance through Pinboard, carrying
// a `Pinboard-Caller` token that names the calling instance, its epoch (and env, in
// hostname-aware mode) and the depth of the request it is serving. Pinboard verifies it,
// checks the caller is still placed there, and forwards one level deeper. It is signed with the
// incarnation's `callerKey`, its JWS header naming the incarnation (`kid`), when the register
// answer carried one; else with the key derived from the deployment token.
//
// In hostname-aware mode the `Host` header names the callee's hostname (docs/proxy.md "Hostname-aware mode"). `fetch`
// drops a `Host` given in its headers, so the call goes through a dispatcher that sets it
// (undici's, which Node's own fetch accepts: the answer stays a global `Response`). The undici
// bundled with Node speaks the older handler protocol: undici's Dispatcher1Wrapper translates it.
import { SignJWT } from "jose"
import { Agent, Dispatcher1Wrapper, type Dispatcher } from "undici"
import { PINBOARD_ISSUER, type CallerPayload } from "../contract/Claims.js"
import { CALLER_HEADER } from "../contract/Headers.js"
import { TRACEPARENT_HEADER } from "../contract/TraceParent.js"
import type { CallInit, CallInstance } from "./Definition.js"

/** Caller tokens live this long (docs/config.md: at most 60 s). */
const CALLER_TOKEN_TTL_S = 30

export interface Caller {
  readonly worker: string
  readonly env: string
  readonly namespace: string
  readonly id: string
  readonly epoch: string
  readonly depth: number
  /** The hostname a call goes to unless its init names one (hostname-aware mode). */
  readonly hostname: string | undefined
  /** The `traceparent` a call carries unless its init sets one: the calls join the request's trace. */
  readonly traceparent?: string | undefined
}

/** What signs caller tokens now: the incarnation's callerKey with its `kid`, or the token-derived key without. */
export interface CallerSigningKey {
  readonly secret: Uint8Array
  readonly kid: string | undefined
}

export const mintCallerToken = (caller: Caller, key: CallerSigningKey, nowMs: number): Promise<string> => {
  const iat = Math.floor(nowMs / 1000)
  const claims: Pick<CallerPayload, "epoch" | "depth" | "env"> = { epoch: caller.epoch, depth: caller.depth, ...(caller.env === "" ? {} : { env: caller.env }) }
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256", typ: "JWT", ...(key.kid === undefined ? {} : { kid: key.kid }) })
    .setIssuer(caller.worker)
    .setAudience(PINBOARD_ISSUER)
    .setSubject(`${caller.namespace}/${caller.id}`)
    .setIssuedAt(iat)
    .setExpirationTime(iat + CALLER_TOKEN_TTL_S)
    .sign(key.secret)
}

/** What Node's fetch takes as `dispatcher`: its bundled undici's type, the same protocol as the package's. */
type FetchDispatcher = NonNullable<RequestInit["dispatcher"]>

/** fetch hands its headers over as an object; the flat-array form is kept working too. */
const withHostHeader = (headers: Dispatcher.DispatchOptions["headers"], hostname: string): Record<string, string> | Array<string> => {
  if (Array.isArray(headers)) {
    const kept: Array<string> = []
    for (let i = 0; i + 1 < headers.length; i += 2) if (headers[i]!.toLowerCase() !== "host") kept.push(headers[i]!, headers[i + 1]!)
    return [...kept, "host", hostname]
  }
  return { ...(headers as Record<string, string>), host: hostname }
}

/** One connection pool for the calls that name a hostname (made on the first); a view of it per hostname that sets `Host`. */
const hostDispatchers = () => {
  let agent: Agent | undefined
  const byHostname = new Map<string, FetchDispatcher>()
  const dispatcherFor = (hostname: string): FetchDispatcher => {
    let dispatcher = byHostname.get(hostname)
    if (dispatcher === undefined) {
      agent ??= new Agent()
      const withHost: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (options, handler) =>
        dispatch({ ...options, headers: withHostHeader(options.headers, hostname) }, handler)
      dispatcher = new Dispatcher1Wrapper(agent.compose(withHost)) as unknown as FetchDispatcher
      byHostname.set(hostname, dispatcher)
    }
    return dispatcher
  }
  return { dispatcherFor, close: () => agent?.close() ?? Promise.resolve() }
}

export interface Calls {
  /** Calls on behalf of `caller`. */
  readonly callAs: (caller: Caller) => CallInstance
  /** Closes the connections of calls that named a hostname. */
  readonly close: () => Promise<void>
}

/** `signingKey` gives the key of the moment; it throws when the worker has none (never registered, and no deployment token). */
export const makeCalls = (pinboard: string, signingKey: () => CallerSigningKey, now: () => number): Calls => {
  const base = pinboard.replace(/\/+$/, "")
  const { dispatcherFor, close } = hostDispatchers()
  const callAs = (caller: Caller): CallInstance =>
    async (namespace, id, path, init: CallInit = {}) => {
      const { hostname = caller.hostname, ...request } = init
      const headers = new Headers(request.headers)
      headers.set(CALLER_HEADER, await mintCallerToken(caller, signingKey(), now()))
      if (caller.traceparent !== undefined && !headers.has(TRACEPARENT_HEADER)) headers.set(TRACEPARENT_HEADER, caller.traceparent)
      const rest = path === "" || path.startsWith("/") || path.startsWith("?") ? path : `/${path}`
      const url = `${base}${namespace}/${encodeURIComponent(id)}${rest}`
      return fetch(url, { ...request, headers, ...(hostname === undefined ? {} : { dispatcher: dispatcherFor(hostname) }) })
    }
  return { callAs, close }
}
