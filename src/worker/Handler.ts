// The worker's node:http side (docs/worker.md): every request and upgrade must carry a valid
// `Pinboard-Attestation` for this worker (else 401; 503 with the in-band refusal while the worker
// has not yet learnt Pinboard's keys, before its first registration); a new activation while the lease is
// unhealthy is refused with the in-band refusal (docs/proxy.md "Retries") (503, `Pinned-Refusal:
// lease-unhealthy`) so Pinboard places the id elsewhere; the rest of the path goes to the
// definition's routes (Routes.ts: 405 with `Allow`, HEAD from GET). Calls the instance makes
// while serving carry the request's trace context on.
import type { IncomingMessage, ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import type { WebSocketServer } from "ws"
import { ATTESTATION_HEADER, LEASE_UNHEALTHY, REFUSAL_HEADER } from "../contract/Headers.js"
import { statusLine } from "../contract/StatusLine.js"
import { parseTraceParent, TRACEPARENT_HEADER } from "../contract/TraceParent.js"
import type { Activation, Activations } from "./Activations.js"
import { KEYS_UNKNOWN, type Attested, type AttestationVerifier } from "./Attestation.js"
import type { Caller } from "./Call.js"
import type { CallInstance, InstanceDefinition, InstanceRequest } from "./Definition.js"
import { placementOf, type PlacementRef } from "./RegistryClient.js"
import { keepGetLength, matchRoute } from "./Routes.js"

export interface HandlerDeps {
  readonly worker: string
  readonly verifyAttestation: AttestationVerifier
  /** The advertiseUrl's path, which Pinboard puts before `/{namespace}/{id}`. */
  readonly prefix: string
  readonly now: () => number
  readonly definitions: ReadonlyMap<string, InstanceDefinition<unknown>>
  readonly activations: Activations
  /** True while a new activation of this placement may be taken. */
  readonly leaseHealthy: (placement: PlacementRef) => boolean
  readonly callAs: (caller: Caller) => CallInstance
  readonly webSockets: WebSocketServer
  readonly log: (message: string, error?: unknown) => void
}

const respondJson = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers }).end(text)
}

const REFUSAL = { [REFUSAL_HEADER]: LEASE_UNHEALTHY, "retry-after": "1" }

/** The path after `/{namespace}/{id}` and the query, when the URL is the one Pinboard forwards for them. */
const restOf = (url: string, prefix: string, attested: Attested): { path: string; query: URLSearchParams } | undefined => {
  const base = `${prefix}${attested.namespace}/${attested.id}`
  if (!url.startsWith(base)) return undefined
  const rest = url.slice(base.length)
  if (rest !== "" && rest[0] !== "/" && rest[0] !== "?") return undefined
  const q = rest.indexOf("?")
  const path = q === -1 ? rest : rest.slice(0, q)
  return { path: path === "" ? "/" : path, query: new URLSearchParams(q === -1 ? "" : rest.slice(q + 1)) }
}

type WorkerAdmission =
  | { readonly _tag: "Admitted"; readonly request: InstanceRequest<unknown>; readonly activation: Activation; readonly definition: InstanceDefinition<unknown> }
  | { readonly _tag: "Refused"; readonly status: number; readonly error: string; readonly headers?: Record<string, string> }

/** The request's own `traceparent`, when it is well formed: what its calls pass on when the worker does not trace. */
const receivedTraceParent = (req: IncomingMessage): string | undefined => {
  const value = req.headers[TRACEPARENT_HEADER]
  return parseTraceParent(value) === undefined ? undefined : (value as string)
}

const admitAttested = async (deps: HandlerDeps, req: IncomingMessage, traceparent: string | undefined): Promise<WorkerAdmission> => {
  const attested = await deps.verifyAttestation(req.headers[ATTESTATION_HEADER], deps.now())
  if (attested === undefined) return { _tag: "Refused", status: 401, error: "missing or invalid Pinboard-Attestation" }
  if (attested === KEYS_UNKNOWN) return { _tag: "Refused", status: 503, error: "attestation keys not known yet", headers: REFUSAL }
  const definition = deps.definitions.get(attested.namespace)
  const rest = restOf(req.url ?? "/", deps.prefix, attested)
  if (definition === undefined || rest === undefined) return { _tag: "Refused", status: 404, error: "not found" }
  const activation = await deps.activations.enter(attested, deps.leaseHealthy)
  if (activation === "lease-unhealthy") return { _tag: "Refused", status: 503, error: "lease unhealthy", headers: REFUSAL }
  if (activation === "released") return { _tag: "Refused", status: 503, error: "placement released", headers: REFUSAL }
  const request: InstanceRequest<unknown> = {
    req,
    state: activation.state,
    activation: activation.context,
    path: rest.path,
    query: rest.query,
    depth: attested.depth,
    subject: attested.subject,
    scopes: attested.scopes,
    caller: attested.caller,
    hostname: attested.hostname,
    call: deps.callAs({ ...placementOf(attested), worker: deps.worker, epoch: activation.epoch, depth: attested.depth, hostname: attested.hostname, traceparent })
  }
  return { _tag: "Admitted", request, activation, definition }
}

/** `traceparent` names the span serving the request, when the worker traces it. */
export const handleRequest = async (
  deps: HandlerDeps,
  req: IncomingMessage,
  res: ServerResponse,
  traceparent = receivedTraceParent(req)
): Promise<void> => {
  let admission: WorkerAdmission
  try {
    admission = await admitAttested(deps, req, traceparent)
  } catch (error) {
    deps.log(`${req.method} ${req.url}: activation failed`, error)
    return respondJson(res, 500, { error: "activation failed" })
  }
  if (admission._tag === "Refused") return respondJson(res, admission.status, { error: admission.error }, admission.headers)
  const { request, activation, definition } = admission
  res.once("close", () => deps.activations.leave(activation))
  const route = matchRoute(definition, req.method ?? "GET", request.path)
  if (route._tag === "NotFound") return respondJson(res, 404, { error: "not found" })
  if (route._tag === "MethodNotAllowed") return respondJson(res, 405, { error: "method not allowed" }, { allow: route.allow })
  if (route.headFromGet) keepGetLength(res)
  try {
    await route.handler(request, res)
  } catch (error) {
    deps.log(`${req.method} ${req.url}: handler failed`, error)
    if (!res.headersSent) respondJson(res, 500, { error: "internal error" })
    else res.destroy()
  }
}

/** Answers an upgrade with a bare status; gives that status. */
const bareStatus = (socket: Duplex, status: number, headers: Record<string, string> = {}): number => {
  let head = `${statusLine(status)}\r\n`
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`
  socket.end(`${head}connection: close\r\ncontent-length: 0\r\n\r\n`)
  return status
}

/**
 * Gives the status the upgrade ended with: 101 once the WebSocket is open, the refusal's, or
 * none when the socket closed before either. `traceparent` names the span handling it, when
 * the worker traces it.
 */
export const handleUpgrade = async (
  deps: HandlerDeps,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  traceparent = receivedTraceParent(req)
): Promise<number | undefined> => {
  socket.on("error", () => socket.destroy())
  let admission: WorkerAdmission
  try {
    admission = await admitAttested(deps, req, traceparent)
  } catch (error) {
    deps.log(`upgrade ${req.url}: activation failed`, error)
    return bareStatus(socket, 500)
  }
  if (admission._tag === "Refused") return bareStatus(socket, admission.status, admission.headers)
  const { request, activation, definition } = admission
  if (definition.webSocket === undefined || activation.closing !== undefined) {
    deps.activations.leave(activation)
    return bareStatus(socket, 404)
  }
  const onSocket = definition.webSocket
  return new Promise((resolve) => {
    // A malformed upgrade is answered by ws without calling back: the use ends with the socket.
    let opened = false
    socket.once("close", () => {
      if (opened) return
      deps.activations.leave(activation)
      resolve(undefined)
    })
    deps.webSockets.handleUpgrade(req, socket, head, (ws) => {
      opened = true
      resolve(101)
      activation.sockets.add(ws)
      ws.once("close", () => {
        activation.sockets.delete(ws)
        deps.activations.leave(activation)
      })
      try {
        onSocket(ws, request)
      } catch (error) {
        deps.log(`upgrade ${req.url}: handler failed`, error)
        ws.close(1011, "handler failed")
      }
    })
  })
}
