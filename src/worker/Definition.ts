// What a worker's author writes (docs/worker.md): one definition per namespace, whose activations
// hold the instance's in-memory state, one live activation per id.
import type { IncomingMessage, ServerResponse } from "node:http"
import type { WebSocket } from "ws"

export type DeactivateReason = "idle" | "replaced" | "lease-unhealthy" | "lease-lost" | "wind-down" | "shutdown" | "failed"

export interface CallInit extends RequestInit {
  /**
   * Hostname-aware mode: the hostname the call is for (its `Host`); default the hostname of the
   * request being served, or for an activation's own calls the one that activated it.
   */
  readonly hostname?: string
}

/** `fetch`-like call of another instance through Pinboard, with `Pinboard-Caller`. */
export type CallInstance = (namespace: string, id: string, path: string, init?: CallInit) => Promise<Response>

export interface ActivationContext {
  /** The placement's env in hostname-aware mode (docs/proxy.md "Hostname-aware mode"); `""` otherwise. */
  readonly env: string
  readonly namespace: string
  readonly id: string
  /** The placement epoch this activation serves (a decimal string). */
  readonly epoch: string
  /** Hostname-aware mode: the hostname of the request that activated it. */
  readonly hostname: string | undefined
  readonly worker: string
  /** Aborted when the activation is torn down. */
  readonly signal: AbortSignal
  /**
   * Runs a task bound to this activation: while it runs the activation is not evicted as idle;
   * on teardown its signal is aborted.
   */
  readonly background: (task: (signal: AbortSignal) => Promise<unknown>) => void
  /** Calls another instance at depth 0 (not on behalf of a request). */
  readonly call: CallInstance
}

/** Who the request is from, as Pinboard attested it. */
export interface RequestIdentity {
  readonly depth: number
  /** The principal's subject, when a credential was verified. */
  readonly subject: string | undefined
  readonly scopes: ReadonlyArray<string>
  /** `"/ns/id"` of the calling instance, for calls from an instance. */
  readonly caller: string | undefined
  /** Hostname-aware mode: the request's hostname (lowercased, no port). */
  readonly hostname: string | undefined
}

export interface InstanceRequest<S> extends RequestIdentity {
  readonly req: IncomingMessage
  readonly state: S
  readonly activation: ActivationContext
  /** The path after the id (always starting with `/`), without the query. */
  readonly path: string
  readonly query: URLSearchParams
  /** Calls another instance on behalf of this request (its depth and its trace context are carried). */
  readonly call: CallInstance
}

export type RouteHandler<S> = (request: InstanceRequest<S>, res: ServerResponse) => unknown

export interface InstanceDefinition<S> {
  /** Builds an activation's state when Pinboard first sends its id here. */
  readonly activate: (context: ActivationContext) => S | Promise<S>
  readonly deactivate?: (state: S, reason: DeactivateReason, context: ActivationContext) => unknown
  /** Pinboard asked for this placement back by `deadline`: finish up; it is released after. */
  readonly windDown?: (state: S, deadline: Date, context: ActivationContext) => unknown
  /** `"METHOD /path"` (path after the id, no query) to handler; `"* /path"` for any method. */
  readonly routes?: Readonly<Record<string, RouteHandler<S>>>
  /** Requests no route matches; absent: 404. */
  readonly fetch?: RouteHandler<S>
  /** WebSocket upgrades; absent: upgrades are refused with 404. */
  readonly webSocket?: (socket: WebSocket, request: InstanceRequest<S>) => unknown
  /** Evicted after this long without requests, open sockets or background tasks; default 5 minutes. */
  readonly idleTimeoutMs?: number
}

export const DEFAULT_IDLE_TIMEOUT_MS = 5 * 60_000

/** Keeps the state type of a definition inferred from `activate`. */
export const defineInstance = <S>(definition: InstanceDefinition<S>): InstanceDefinition<S> => definition
