// The catalogue: every response Pinboard writes itself (seed "Errors", routing.md
// refusals, DESIGN 4 and 9). One class per row; `reply` is the exact response.
import { Schema } from "effect"

export const TEXT_PLAIN = "text/plain; charset=utf-8"
export const APPLICATION_JSON = "application/json"

export interface Reply {
  readonly status: number
  readonly contentType: typeof TEXT_PLAIN | typeof APPLICATION_JSON
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

export const retryAfterSeconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1000))

// --- Addressing (routing.md "Addressing") ---

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

// --- Resolution refusals (routing.md "Resolution", DESIGN 5) ---

export class RegistryColdStart extends Schema.TaggedError<RegistryColdStart>()("RegistryColdStart", {
  retryAfterMs: Schema.Number
}) {
  get reply(): Reply {
    return refusal("registry cold start, retry", this.retryAfterMs)
  }
}

export class NoLiveBackends extends Schema.TaggedError<NoLiveBackends>()("NoLiveBackends", {}) {
  get reply(): Reply {
    return refusal("no live backends for namespace", 1000)
  }
}

export class RegistryUnavailable extends Schema.TaggedError<RegistryUnavailable>()("RegistryUnavailable", {
  cause: Schema.optional(Schema.Defect)
}) {
  get reply(): Reply {
    return refusal("registry unavailable, retry", 1000)
  }
}

// --- Forwarding (seed "Errors") ---

export class BadGateway extends Schema.TaggedError<BadGateway>()("BadGateway", { cause: Schema.optional(Schema.Defect) }) {
  get reply(): Reply {
    return text(502, "bad gateway")
  }
}

// --- Registry API (DESIGN 4) ---

export class InvalidDeploymentToken extends Schema.TaggedError<InvalidDeploymentToken>()(
  "InvalidDeploymentToken",
  {}
) {
  get reply(): Reply {
    return json(401, "invalid deployment token")
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

// --- Probes (DESIGN 9) ---

export class NotReady extends Schema.TaggedError<NotReady>()("NotReady", { reason: Schema.String }) {
  get reply(): Reply {
    return json(503, "not ready")
  }
}

// --- Anything else is a defect ---

export const internalError: Reply = json(500, "internal error")

/** Every row, with an example and when it is written: the source of docs/errors.md. */
export const catalogue = [
  { example: new IdEmpty(), when: "The id segment is empty (`/threads//x`)." },
  { example: new IdTooLong(), when: "The id is longer than 256 characters." },
  { example: new IdBadCharacters(), when: "The id has a character outside `[A-Za-z0-9._~-]` (`%` included: ids are not decoded)." },
  { example: new UnknownNamespace(), when: "The path has no id segment, or no worker ever registered the namespace." },
  { example: new RegistryColdStart({ retryAfterMs: 15_000 }), when: "The id's bucket is in its cold start (one lease after its first use); `Retry-After` is the time left." },
  { example: new NoLiveBackends(), when: "No worker of the namespace can take a new placement (all lapsed, draining, degraded, short of lease, or excluded)." },
  { example: new RegistryUnavailable({}), when: "Redis is unreachable or slower than 1 s." },
  { example: new BadGateway({}), when: "The worker was unreachable or failed before sending response headers." },
  { example: new InvalidDeploymentToken(), when: "A `/registry/*` call without `Authorization: Bearer <deployment token>`." },
  { example: new InvalidRequest({ problem: "headroom: expected a finite number >= 0" }), when: "A registry API body, path or query parameter is invalid; the message names the field and what was expected." },
  { example: new BodyTooLarge(), when: "A registry API body over 64 KiB." },
  { example: new RouteNotFound(), when: "An unknown `/registry/*` route." },
  { example: new MethodNotAllowed(), when: "A known route with the wrong method (probes take GET and HEAD)." },
  { example: new LeaseLost(), when: "A heartbeat whose incarnation does not match, whose lease already lapsed, or that a wiped bucket does not know." },
  { example: new NotPlaced(), when: "`GET /registry/placements/...` for an id with no placement row." },
  { example: new NotReady({ reason: "shutting down" }), when: "`/readyz` while shutting down, when the registry does not answer within 1 s, or when its clock is more than 1 s off." }
] as const
