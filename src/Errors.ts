// The catalogue: every response Pinboard writes itself (docs/errors.md,
// docs/proxy.md, docs/protocol.md "Resolution", docs/registry-api.md). One class per row; `reply` is the exact response.
import { Schema } from "effect"

export const TEXT_PLAIN = "text/plain; charset=utf-8"
export const APPLICATION_JSON = "application/json"

export interface Reply {
  readonly status: number
  /** Absent for an empty body. */
  readonly contentType?: typeof TEXT_PLAIN | typeof APPLICATION_JSON
  readonly body: string
  /** Sent as `Retry-After`, rounded up to whole seconds, at least 1. */
  readonly retryAfterMs?: number
}

const text = (status: number, body: string): Reply => ({ status, contentType: TEXT_PLAIN, body })
const json = (status: number, error: string): Reply => ({
  status,
  contentType: APPLICATION_JSON,
  body: JSON.stringify({ error })
})
const refusal = (error: string, retryAfterMs: number): Reply => ({ ...json(503, error), retryAfterMs })
const empty = (status: number): Reply => ({ status, body: "" })

/** Refusals whose wait is not known: the client may retry at once, so the least Retry-After. */
const RETRY_SOON_MS = 1000

export const retryAfterSeconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1000))

// --- The HTTP message (RFC 9112; docs/proxy.md "What every client gets"), before any route ---

export class MissingHost extends Schema.TaggedError<MissingHost>()("MissingHost", {}) {
  get reply(): Reply {
    return json(400, "missing Host header")
  }
}

export class RepeatedHost extends Schema.TaggedError<RepeatedHost>()("RepeatedHost", {}) {
  get reply(): Reply {
    return json(400, "more than one Host header")
  }
}

export class TransferCodingNotImplemented extends Schema.TaggedError<TransferCodingNotImplemented>()("TransferCodingNotImplemented", {}) {
  get reply(): Reply {
    return json(501, "transfer coding not implemented")
  }
}

export class ConnectNotImplemented extends Schema.TaggedError<ConnectNotImplemented>()("ConnectNotImplemented", {}) {
  get reply(): Reply {
    return json(501, "CONNECT not implemented")
  }
}

// --- Addressing (docs/proxy.md "Addressing") ---

export class IdEmpty extends Schema.TaggedError<IdEmpty>()("IdEmpty", {}) {
  get reply(): Reply {
    return text(400, "id must be non-empty")
  }
}

export class IdTooLong extends Schema.TaggedError<IdTooLong>()("IdTooLong", {}) {
  get reply(): Reply {
    return text(400, "id must be at most 256 characters")
  }
}

export class IdBadCharacters extends Schema.TaggedError<IdBadCharacters>()("IdBadCharacters", {}) {
  get reply(): Reply {
    return text(400, "id must contain only [A-Za-z0-9._~-]")
  }
}

export class UnknownNamespace extends Schema.TaggedError<UnknownNamespace>()("UnknownNamespace", {}) {
  get reply(): Reply {
    return json(404, "unknown namespace")
  }
}

// --- Resolution refusals (docs/protocol.md "Resolution") ---

export class RegistryColdStart extends Schema.TaggedError<RegistryColdStart>()("RegistryColdStart", {
  retryAfterMs: Schema.Number
}) {
  get reply(): Reply {
    return refusal("registry cold start, retry", this.retryAfterMs)
  }
}

export class NoLiveBackends extends Schema.TaggedError<NoLiveBackends>()("NoLiveBackends", {}) {
  get reply(): Reply {
    return refusal("no live backends for namespace", RETRY_SOON_MS)
  }
}

export class RegistryUnavailable extends Schema.TaggedError<RegistryUnavailable>()("RegistryUnavailable", {
  cause: Schema.optional(Schema.Defect()),
  /** Why, in one line (registry/RedisFailure.ts), for logs and /readyz; never in the answer. */
  reason: Schema.optional(Schema.String)
}) {
  get reply(): Reply {
    return refusal("registry unavailable, retry", RETRY_SOON_MS)
  }
}

export class ClockOffsetTooLarge extends Schema.TaggedError<ClockOffsetTooLarge>()("ClockOffsetTooLarge", {
  offsetMs: Schema.Number
}) {
  get reply(): Reply {
    return refusal("clock offset from the registry too large, retry", RETRY_SOON_MS)
  }
}

// --- Hostname-aware mode (docs/proxy.md "Hostname-aware mode") ---

export class TakeoverInProgress extends Schema.TaggedError<TakeoverInProgress>()("TakeoverInProgress", {
  retryAfterMs: Schema.Number
}) {
  get reply(): Reply {
    return refusal("takeover in progress, retry", this.retryAfterMs)
  }
}

export class PlacementHeldByAnotherHostname extends Schema.TaggedError<PlacementHeldByAnotherHostname>()(
  "PlacementHeldByAnotherHostname",
  {}
) {
  get reply(): Reply {
    return refusal("placement held by another hostname", RETRY_SOON_MS)
  }
}

export class HostnameBindingDisplaced extends Schema.TaggedError<HostnameBindingDisplaced>()("HostnameBindingDisplaced", {
  retryAfterMs: Schema.Number
}) {
  get reply(): Reply {
    return refusal("hostname binding displaced, retry", this.retryAfterMs)
  }
}

// --- Data-plane auth (docs/config.md "Data-plane auth") ---

export class InvalidCredential extends Schema.TaggedError<InvalidCredential>()("InvalidCredential", {}) {
  get reply(): Reply {
    return json(401, "invalid credential")
  }
}

export class AuthenticationRequired extends Schema.TaggedError<AuthenticationRequired>()("AuthenticationRequired", {}) {
  get reply(): Reply {
    return json(401, "authentication required")
  }
}

export class NamespaceNotAllowed extends Schema.TaggedError<NamespaceNotAllowed>()("NamespaceNotAllowed", {}) {
  get reply(): Reply {
    return json(403, "namespace not allowed")
  }
}

export class InsufficientScope extends Schema.TaggedError<InsufficientScope>()("InsufficientScope", {}) {
  get reply(): Reply {
    return json(403, "insufficient scope")
  }
}

// --- Calls from an instance (docs/config.md) ---

export class InvalidAttestation extends Schema.TaggedError<InvalidAttestation>()("InvalidAttestation", {}) {
  get reply(): Reply {
    return json(403, "invalid attestation")
  }
}

export class AttestationExpired extends Schema.TaggedError<AttestationExpired>()("AttestationExpired", {}) {
  get reply(): Reply {
    return json(403, "attestation expired")
  }
}

export class StaleAttestation extends Schema.TaggedError<StaleAttestation>()("StaleAttestation", {}) {
  get reply(): Reply {
    return json(403, "stale attestation")
  }
}

export class DepthExceeded extends Schema.TaggedError<DepthExceeded>()("DepthExceeded", {}) {
  get reply(): Reply {
    return json(508, "subrequest depth exceeded")
  }
}

// --- Forwarding (docs/proxy.md "Forwarding", "Retries", "Limits") ---

/** `reason` says why, in the access log and the debug log: see proxy/GatewayFailure.ts. */
export class BadGateway extends Schema.TaggedError<BadGateway>()("BadGateway", {
  reason: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {
  get reply(): Reply {
    return text(502, "bad gateway")
  }
}

export class ClientAborted extends Schema.TaggedError<ClientAborted>()("ClientAborted", {}) {
  get reply(): Reply {
    return empty(502)
  }

  get reason(): string {
    return "client closed before the forward"
  }
}

export class UpstreamTimeout extends Schema.TaggedError<UpstreamTimeout>()("UpstreamTimeout", {}) {
  get reply(): Reply {
    return text(504, "upstream timeout")
  }
}

export class WorkerAtCapacity extends Schema.TaggedError<WorkerAtCapacity>()("WorkerAtCapacity", {}) {
  get reply(): Reply {
    return refusal("worker at capacity, retry", RETRY_SOON_MS)
  }
}

export class WorkerRefusedActivation extends Schema.TaggedError<WorkerRefusedActivation>()("WorkerRefusedActivation", {}) {
  get reply(): Reply {
    return refusal("worker refused activation, retry", RETRY_SOON_MS)
  }
}

// --- Registry API (docs/registry-api.md) ---

export class InvalidDeploymentToken extends Schema.TaggedError<InvalidDeploymentToken>()(
  "InvalidDeploymentToken",
  {}
) {
  get reply(): Reply {
    return json(401, "invalid deployment token")
  }
}

/** Credentials by role (docs/deploy.md "Credentials"): a worker credential outside its entry. */
export class CredentialDoesNotCoverWorker extends Schema.TaggedError<CredentialDoesNotCoverWorker>()("CredentialDoesNotCoverWorker", {}) {
  get reply(): Reply {
    return json(403, "credential does not cover worker")
  }
}

export class CredentialDoesNotCoverNamespace extends Schema.TaggedError<CredentialDoesNotCoverNamespace>()("CredentialDoesNotCoverNamespace", {}) {
  get reply(): Reply {
    return json(403, "credential does not cover namespace")
  }
}

export class PlacementHeldByAnotherWorker extends Schema.TaggedError<PlacementHeldByAnotherWorker>()("PlacementHeldByAnotherWorker", {}) {
  get reply(): Reply {
    return json(403, "placement held by another worker")
  }
}

export class OperatorCredentialRequired extends Schema.TaggedError<OperatorCredentialRequired>()("OperatorCredentialRequired", {}) {
  get reply(): Reply {
    return json(403, "operator credential required")
  }
}

export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", { problem: Schema.String }) {
  get reply(): Reply {
    return json(400, this.problem)
  }
}

export class BodyTooLarge extends Schema.TaggedError<BodyTooLarge>()("BodyTooLarge", {}) {
  get reply(): Reply {
    return json(413, "body too large")
  }
}

export class RouteNotFound extends Schema.TaggedError<RouteNotFound>()("RouteNotFound", {}) {
  get reply(): Reply {
    return json(404, "not found")
  }
}

export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", {}) {
  get reply(): Reply {
    return json(405, "method not allowed")
  }
}

export class BindingHeldByAnotherEnv extends Schema.TaggedError<BindingHeldByAnotherEnv>()("BindingHeldByAnotherEnv", {}) {
  get reply(): Reply {
    return json(409, "hostname binding held by another env")
  }
}

export class LeaseLost extends Schema.TaggedError<LeaseLost>()("LeaseLost", {}) {
  get reply(): Reply {
    return json(410, "lease lost")
  }
}

export class NotPlaced extends Schema.TaggedError<NotPlaced>()("NotPlaced", {}) {
  get reply(): Reply {
    return json(404, "not placed")
  }
}

// --- Probes (docs/proxy.md) ---

export class NotReady extends Schema.TaggedError<NotReady>()("NotReady", { reason: Schema.String }) {
  get reply(): Reply {
    return { status: 503, contentType: APPLICATION_JSON, body: JSON.stringify({ error: "not ready", reason: this.reason }) }
  }
}

// --- Anything else is a defect ---

export const internalError: Reply = json(500, "internal error")

interface CatalogueRow {
  readonly example: { readonly _tag: string; readonly reply: Reply }
  readonly when: string
}

/**
 * The catalogue: one row per class, with an example and when it is written. The one list of
 * errors: `CatalogueError` is what it holds, docs/errors.md is rendered from it, and the server
 * answers only errors of `CatalogueError`, so a class used in a handler but left out of this
 * list does not compile.
 */
export const catalogue = [
  { example: new MissingHost(), when: "An HTTP/1.1 request without `Host` (RFC 9112 3.2), on any path; in hostname-aware mode any request without one, HTTP/1.0 included." },
  { example: new RepeatedHost(), when: "The request has more than one `Host` header line (RFC 9112 3.2), in either mode and on any path." },
  { example: new TransferCodingNotImplemented(), when: "The request's `Transfer-Encoding` names a coding other than `chunked` (`gzip, chunked`, say): Pinboard does not decode it (RFC 9112 6.1)." },
  { example: new ConnectNotImplemented(), when: "A `CONNECT` request: Pinboard is not a forward proxy. Answered as a bare status line (no body), and the connection closes." },
  { example: new IdEmpty(), when: "The id segment is empty (`/threads//x`)." },
  { example: new IdTooLong(), when: "The id is longer than 256 characters." },
  { example: new IdBadCharacters(), when: "The id has a character outside `[A-Za-z0-9._~-]` (`%` included: ids are not decoded)." },
  { example: new UnknownNamespace(), when: "The path has no id segment, or no worker ever registered the namespace." },
  { example: new RegistryColdStart({ retryAfterMs: 15_000 }), when: "The id's bucket is in its cold start (one lease after its first use); `Retry-After` is the time left." },
  { example: new NoLiveBackends(), when: "No worker of the namespace can take a new placement (all lapsed, draining, degraded, short of lease, or excluded)." },
  { example: new RegistryUnavailable({}), when: "Redis is unreachable or slower than 1 s, or this Pinboard has not sampled the registry's clock (Redis `TIME`) for 6 s." },
  { example: new ClockOffsetTooLarge({ offsetMs: 20_000 }), when: "This Pinboard's wall clock is further than `registry.maxClockOffsetMs` (1 s) from the registry's clock: it makes no registry writes (no placement, no heartbeat, no sweep) until it is back in bound (docs/deploy.md \"Clocks\")." },
  { example: new TakeoverInProgress({ retryAfterMs: 15_000 }), when: "Hostname-aware mode, `wind_down` takeover: the id's owner on another hostname has until its deadline to release; `Retry-After` is the time left." },
  { example: new PlacementHeldByAnotherHostname(), when: "Hostname-aware mode, `deny` takeover: the id is placed on a worker of another hostname." },
  { example: new HostnameBindingDisplaced({ retryAfterMs: 15_000 }), when: "Hostname-aware mode: the `(hostname, namespace)` pair was rebound to another env less than one lease ago; new ids wait." },
  { example: new InvalidCredential(), when: "A credential was presented and no provider of the rule accepted it (a JWKS outage included)." },
  { example: new AuthenticationRequired(), when: "The namespace's rule requires a credential and none was presented." },
  { example: new NamespaceNotAllowed(), when: "Data-plane rules are configured and none matches the namespace (no exact rule, no `*`)." },
  { example: new InsufficientScope(), when: "The principal lacks a scope the rule requires, or an attested caller's namespace is not in the rule's `callers`." },
  { example: new InvalidAttestation(), when: "A `Pinboard-Caller` token that is malformed, badly signed or not for `pinboard`." },
  { example: new AttestationExpired(), when: "A `Pinboard-Caller` token past its `exp`." },
  { example: new StaleAttestation(), when: "A `Pinboard-Caller` token whose instance is no longer placed at that epoch on that worker." },
  { example: new DepthExceeded(), when: "A call from an instance would go deeper than 50." },
  { example: new BadGateway({ reason: "connect refused" }), when: "The worker was unreachable or failed before sending response headers (a new placement is released first). The access log's `reason` says why: `connect refused`, `connect timeout`, `reset before headers`, `header overflow`, `parse error`..." },
  { example: new ClientAborted(), when: "The client went away before the forward started; nothing was sent to the worker." },
  { example: new UpstreamTimeout(), when: "No response headers within `forwards.timeoutMs` (30 s) of the request being sent; a streaming body is never cut by it." },
  { example: new WorkerAtCapacity(), when: "More than `forwards.maxInflight` forwards to the worker await headers in this Pinboard process." },
  { example: new WorkerRefusedActivation(), when: "The worker answered `Pinned-Refusal: lease-unhealthy` to a request with a body, or the one re-place also refused or found no other worker." },
  { example: new InvalidDeploymentToken(), when: "A `/registry/*` call without `Authorization: Bearer <deployment token>`; with `credentials`, one whose key or token matches no operator or worker credential." },
  { example: new CredentialDoesNotCoverWorker(), when: "With `credentials`: a worker credential registers, heartbeats or names a worker id outside its entry's `workers`." },
  { example: new CredentialDoesNotCoverNamespace(), when: "With `credentials`: a worker credential registers a namespace (or hostname binding) outside its entry's `namespaces`, or releases or tags an id of one." },
  { example: new PlacementHeldByAnotherWorker(), when: "With `credentials`: a worker credential releases or tags a placement whose owner its entry does not cover (checked in the same script call as the compare-and-set)." },
  { example: new OperatorCredentialRequired(), when: "With `credentials`: a worker credential lists the workers, reads a placement, or deregisters a worker its entry does not cover." },
  { example: new InvalidRequest({ problem: "headroom: expected a finite number >= 0" }), when: "A registry API body, path or query parameter is invalid; the message names the field and what was expected." },
  { example: new BodyTooLarge(), when: "A registry API body over 64 KiB." },
  { example: new RouteNotFound(), when: "An unknown `/registry/*` route; with `registry.port` set, any `/registry/*` on the data port, and any path but the probes and `/registry/*` on the registry port." },
  { example: new MethodNotAllowed(), when: "A known route with the wrong method (probes take GET and HEAD)." },
  { example: new BindingHeldByAnotherEnv(), when: "Hostname-aware mode: a registration names another env for a bound `(hostname, namespace)` without a higher epoch." },
  { example: new LeaseLost(), when: "A heartbeat whose incarnation does not match, whose lease already lapsed, or that a wiped bucket does not know." },
  { example: new NotPlaced(), when: "`GET /registry/placements/...` for an id with no placement row." },
  { example: new NotReady({ reason: "shutting down" }), when: "`/readyz` while shutting down, when the registry does not answer within 1 s, or while this Pinboard cannot tell the registry's time within `registry.maxClockOffsetMs`; `reason` says which (`shutting down`, `registry unavailable`, `registry slow`, `registry time not sampled`, `clock offset from the registry <n> ms, past registry.maxClockOffsetMs`)." }
] as const satisfies ReadonlyArray<CatalogueRow>

/** Every error Pinboard answers with a catalogue row. */
export type CatalogueError = (typeof catalogue)[number]["example"]
