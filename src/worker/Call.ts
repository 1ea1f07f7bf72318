// Calls from an instance (docs/config.md): a request to another instance through Pinboard, carrying
// a `Pinboard-Caller` token that names the calling instance, its epoch (and env, in
// hostname-aware mode) and the depth of the request it is serving. Pinboard verifies it,
// checks the caller is still placed there, and forwards one level deeper.
//
// In hostname-aware mode the `Host` header names the callee's hostname (docs/proxy.md "Hostname-aware mode"). `fetch`
// drops a `Host` given in its headers, so the call goes through a dispatcher that sets it
// (undici's, which Node's own fetch accepts: the answer stays a global `Response`). The undici
// bundled with Node may speak the older handler protocol; the dispatcher translates it.
import type { IncomingHttpHeaders } from "node:http"
import type { Duplex } from "node:stream"
import { SignJWT } from "jose"
import { Agent, type Dispatcher } from "undici"
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

export const mintCallerToken = (caller: Caller, key: Uint8Array, nowMs: number): Promise<string> => {
  const iat = Math.floor(nowMs / 1000)
  const claims: Pick<CallerPayload, "epoch" | "depth" | "env"> = { epoch: caller.epoch, depth: caller.depth, ...(caller.env === "" ? {} : { env: caller.env }) }
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuer(caller.worker)
    .setAudience(PINBOARD_ISSUER)
    .setSubject(`${caller.namespace}/${caller.id}`)
    .setIssuedAt(iat)
    .setExpirationTime(iat + CALLER_TOKEN_TTL_S)
    .sign(key)
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

/**
 * The handler a fetch gives a dispatcher in the protocol of the undici bundled with Node up to
 * 7.x: the package's dispatchers (8.x) take only the newer one (`onRequestStart`, `onResponseStart`...).
 */
interface BundledFetchHandler {
  onConnect?(abort: (reason?: Error) => void, context?: unknown): void
  onResponseStarted?(): void
  onHeaders?(statusCode: number, rawHeaders: Array<Buffer>, resume: () => void, statusText: string): boolean
  onData?(chunk: Buffer): boolean
  onComplete?(rawTrailers: Array<Buffer>): void
  onError?(error: Error): void
  onUpgrade?(statusCode: number, rawHeaders: Array<Buffer>, socket: Duplex): void
  onBodySent?(chunk: Buffer): void
  onRequestSent?(): void
}

/** Header lines as the older protocol has them, `[name, value, name, value...]`: the raw ones when the client kept them. */
const rawLines = (raw: Dispatcher.DispatchController["rawHeaders"], parsed: IncomingHttpHeaders): Array<Buffer> => {
  if (Array.isArray(raw)) return (raw as Array<Buffer | string>).map((line) => (typeof line === "string" ? Buffer.from(line, "latin1") : line))
  const lines: Array<Buffer> = []
  for (const [name, value] of Object.entries(parsed)) {
    for (const one of Array.isArray(value) ? value : [value ?? ""]) lines.push(Buffer.from(name, "latin1"), Buffer.from(one, "latin1"))
  }
  return lines
}

/** `handler` as the package's dispatchers take it: as it is when it speaks their protocol already. */
const newerProtocol = (handler: Dispatcher.DispatchHandler | BundledFetchHandler): Dispatcher.DispatchHandler => {
  if ("onRequestStart" in handler || !("onHeaders" in handler)) return handler as Dispatcher.DispatchHandler
  const older = handler as BundledFetchHandler
  return {
    onRequestStart: (controller, context) => older.onConnect?.((reason) => controller.abort(reason ?? new Error("aborted")), context),
    onResponseStarted: () => older.onResponseStarted?.(),
    onResponseStart: (controller, statusCode, headers, statusMessage) => {
      if (older.onHeaders?.(statusCode, rawLines(controller.rawHeaders, headers), () => controller.resume(), statusMessage ?? "") === false) controller.pause()
    },
    onResponseData: (controller, chunk) => {
      if (older.onData?.(chunk) === false) controller.pause()
    },
    onResponseEnd: (controller, trailers) => older.onComplete?.(rawLines(controller.rawTrailers, trailers)),
    onResponseError: (_controller, error) => older.onError?.(error),
    onRequestUpgrade: (controller, statusCode, headers, socket) => older.onUpgrade?.(statusCode, rawLines(controller.rawHeaders, headers), socket),
    ...(older.onBodySent === undefined ? {} : { onBodySent: (chunk: Buffer) => older.onBodySent?.(chunk) }),
    ...(older.onRequestSent === undefined ? {} : { onRequestSent: () => older.onRequestSent?.() })
  }
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
        dispatch({ ...options, headers: withHostHeader(options.headers, hostname) }, newerProtocol(handler))
      dispatcher = agent.compose(withHost) as unknown as FetchDispatcher
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

export const makeCalls = (pinboard: string, key: Uint8Array, now: () => number): Calls => {
  const base = pinboard.replace(/\/+$/, "")
  const { dispatcherFor, close } = hostDispatchers()
  const callAs = (caller: Caller): CallInstance =>
    async (namespace, id, path, init: CallInit = {}) => {
      const { hostname = caller.hostname, ...request } = init
      const headers = new Headers(request.headers)
      headers.set(CALLER_HEADER, await mintCallerToken(caller, key, now()))
      if (caller.traceparent !== undefined && !headers.has(TRACEPARENT_HEADER)) headers.set(TRACEPARENT_HEADER, caller.traceparent)
      const rest = path === "" || path.startsWith("/") || path.startsWith("?") ? path : `/${path}`
      const url = `${base}${namespace}/${encodeURIComponent(id)}${rest}`
      return fetch(url, { ...request, headers, ...(hostname === undefined ? {} : { dispatcher: dispatcherFor(hostname) }) })
    }
  return { callAs, close }
}
