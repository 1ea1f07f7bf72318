// The two tokens Pinboard and its workers exchange (docs/worker.md, docs/config.md), as their JWT
// payloads: HS256 over the attestation key (AttestationKey.ts), whole seconds.

/** Who signs `Pinboard-Attestation` and who a `Pinboard-Caller` token is for. */
export const PINBOARD_ISSUER = "pinboard"

/** `Pinboard-Attestation`: Pinboard to the worker it forwards to. */
export interface AttestationPayload {
  readonly iss: typeof PINBOARD_ISSUER
  /** The worker. */
  readonly aud: string
  readonly iat: number
  readonly exp: number
  /** The namespace, with its leading slash. */
  readonly ns: string
  readonly id: string
  /** The placement epoch, a decimal string. */
  readonly epoch: string
  readonly depth: number
  /** The principal's subject and space-separated scopes, when a credential was verified. */
  readonly sub?: string
  readonly scope?: string
  /** `"<ns>/<id>"` of the calling instance, for calls from an instance. */
  readonly caller?: string
  /** Hostname-aware mode: the placement's env and the request's hostname. */
  readonly env?: string
  readonly host?: string
}

export const ATTESTATION_TTL_S = 60

/**
 * Clock skew allowed on `exp`, `iat` and `nbf` wherever a token is checked: attestations at the
 * worker, caller tokens and credentials at Pinboard (docs/config.md, docs/deploy.md "Clocks").
 */
export const CLOCK_TOLERANCE_S = 5

/** `Pinboard-Caller`: a worker's instance calling another through Pinboard. */
export interface CallerPayload {
  /** The calling worker. */
  readonly iss: string
  readonly aud: typeof PINBOARD_ISSUER
  /** `"<ns>/<id>"` of the calling instance. */
  readonly sub: string
  readonly iat: number
  readonly exp: number
  /** The caller's placement epoch. */
  readonly epoch: string
  /** The depth of the request the caller is serving. */
  readonly depth: number
  /** The caller's placement env, in hostname-aware mode. */
  readonly env?: string
}

/** Pinboard refuses a caller token that claims to live longer than this. */
export const CALLER_TOKEN_MAX_LIFETIME_S = 60
