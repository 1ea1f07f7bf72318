// `Pinboard-Attestation` (docs/config.md): the JWS Pinboard adds to every forward, telling the
// worker that the request came through Pinboard, for which placement, at what depth, and for
// whom. HS256 with the key derived from the deployment token, or EdDSA with the first
// attestation key (AttestationKeys.ts), its header naming the key's kid. Signed synchronously
// with a key made once: the forward waits on nothing for it. (jose's signers are asynchronous;
// tests verify these tokens with jose's jwtVerify.)
import { createHmac, createSecretKey, sign, type KeyObject } from "node:crypto"
import { ATTESTATION_TTL_S, PINBOARD_ISSUER, type AttestationPayload } from "../contract/Claims.js"

export interface AttestationClaims {
  /** The worker the forward goes to (`aud`). */
  readonly worker: string
  readonly namespace: string
  readonly id: string
  readonly epoch: string
  readonly depth: number
  /** The principal's subject and scopes, when a credential was verified. */
  readonly principal: { readonly subject: string | undefined; readonly scopes: ReadonlyArray<string> } | undefined
  /** `"<ns>/<id>"` of the calling instance, for calls from an instance. */
  readonly caller: string | undefined
  /** Hostname-aware mode: the placement's env and the request's hostname (docs/config.md). */
  readonly hostname?: { readonly env: string; readonly host: string } | undefined
}

export type AttestationSigner = (claims: AttestationClaims, nowMs: number) => string

/** The token-derived HS256 key, or an Ed25519 private key and its kid. */
export type AttestationSigningKey =
  | { readonly alg: "HS256"; readonly secret: Uint8Array }
  | { readonly alg: "EdDSA"; readonly kid: string; readonly privateKey: KeyObject }

/** The encoded JWS header and the signature of a signing input, for one key. */
interface Jws {
  readonly header: string
  readonly signature: (signingInput: string) => string
}

const base64urlJson = (header: object): string => Buffer.from(JSON.stringify(header)).toString("base64url")

const jwsFor = (key: AttestationSigningKey): Jws => {
  if (key.alg === "HS256") {
    const secret = createSecretKey(key.secret)
    return {
      header: base64urlJson({ alg: "HS256", typ: "JWT" }),
      signature: (signingInput) => createHmac("sha256", secret).update(signingInput).digest("base64url")
    }
  }
  const { privateKey } = key
  return {
    header: base64urlJson({ alg: "EdDSA", typ: "JWT", kid: key.kid }),
    // Ed25519 takes no digest: the algorithm argument is null.
    signature: (signingInput) => sign(null, Buffer.from(signingInput), privateKey).toString("base64url")
  }
}

/** How many tokens of one second are kept at most (see makeAttestationSigner). */
const MAX_KEPT_TOKENS = 10_000

/**
 * Tokens carry whole seconds (`iat`), so every forward with the same claims within one second
 * gets the same token: it is signed once and kept until the second is over. A placement's
 * forwards without a principal, caller or hostname are kept under their few fields; others
 * under their whole payload, which tells any two claim sets apart (a subject may hold any
 * character). This matters most with an Ed25519 key, ten times HS256's cost to sign.
 */
export const makeAttestationSigner = (key: AttestationSigningKey): AttestationSigner => {
  const jws = jwsFor(key)
  // Mutants of when a token is kept or dropped are equivalent: the kept tokens only cache
  // deterministic signatures, so keeping, clearing or skipping signs the same token
  // (docs/reliability.md "Mutation testing").
  // Stryker disable next-line UnaryOperator: equivalent, a cache
  let keptSecond = -1
  const kept = new Map<string, string>()
  return (claims, nowMs) => {
    // Stryker disable next-line ArithmeticOperator: equivalent, a cache
    const second = Math.floor(nowMs / 1000)
    // Stryker disable next-line ConditionalExpression: equivalent, a cache
    if (second !== keptSecond) {
      keptSecond = second
      kept.clear()
    }
    const plain = claims.principal === undefined && claims.caller === undefined && claims.hostname === undefined
    const payload = plain ? undefined : encodedPayload(claims, second)
    const keptAs = payload ?? `${claims.worker}\n${claims.namespace}\n${claims.id}\n${claims.epoch}\n${claims.depth}`
    let token = kept.get(keptAs)
    // Stryker disable next-line ConditionalExpression: equivalent, a cache
    if (token === undefined) {
      token = signed(jws, payload ?? encodedPayload(claims, second))
      // Stryker disable next-line ConditionalExpression,EqualityOperator: equivalent, a cache
      if (kept.size < MAX_KEPT_TOKENS) kept.set(keptAs, token)
    }
    return token
  }
}

/** The payload, encoded (base64url of its JSON). */
const encodedPayload = (claims: AttestationClaims, iat: number): string => {
  const payload: { -readonly [Claim in keyof AttestationPayload]: AttestationPayload[Claim] } = {
    iss: PINBOARD_ISSUER,
    aud: claims.worker,
    iat,
    exp: iat + ATTESTATION_TTL_S,
    ns: claims.namespace,
    id: claims.id,
    epoch: claims.epoch,
    depth: claims.depth
  }
  if (claims.principal !== undefined) {
    if (claims.principal.subject !== undefined) payload.sub = claims.principal.subject
    payload.scope = claims.principal.scopes.join(" ")
  }
  if (claims.caller !== undefined) payload.caller = claims.caller
  if (claims.hostname !== undefined) {
    payload.env = claims.hostname.env
    payload.host = claims.hostname.host
  }
  return base64urlJson(payload)
}

const signed = (jws: Jws, payload: string): string => {
  const signingInput = `${jws.header}.${payload}`
  return `${signingInput}.${jws.signature(signingInput)}`
}
