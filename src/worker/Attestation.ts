// The worker's side of `Pinboard-Attestation` (docs/worker.md "Attestation keys"), verified with
// jose for this worker (`aud`): while Pinboard publishes keys, an EdDSA JWS whose `kid` is in
// the set and nothing else (an HS256 token is refused even when signed with the key derived from
// the deployment token, which every holder of that token could forge); while it publishes none,
// HS256 with the key derived from the deployment token. Anything else did not come through Pinboard.
import { decodeProtectedHeader, jwtVerify, type JWTVerifyGetKey, type JWTVerifyOptions } from "jose"
import { CLOCK_TOLERANCE_S, PINBOARD_ISSUER, type AttestationPayload } from "../contract/Claims.js"
import type { AttestationKeySet } from "./AttestationKeySet.js"
import type { RequestIdentity } from "./Definition.js"

export interface Attested extends RequestIdentity {
  /** The placement's env (hostname-aware mode); `""` when the token names none. */
  readonly env: string
  readonly namespace: string
  readonly id: string
  readonly epoch: string
}

/** The key set is not known yet (the worker has not reached Pinboard): nothing can be verified. */
export const KEYS_UNKNOWN = "keys-unknown"

/** A request's attestation: what it attests, undefined when it is not from Pinboard, or KEYS_UNKNOWN. */
export type AttestationVerifier = (token: string | Array<string> | undefined, nowMs: number) => Promise<Attested | undefined | typeof KEYS_UNKNOWN>

/** The `kid` of a token whose JWS header says EdDSA, when it names one. */
const eddsaKid = (token: string): string | undefined => {
  try {
    const { alg, kid } = decodeProtectedHeader(token)
    return alg === "EdDSA" && typeof kid === "string" ? kid : undefined
  } catch {
    return undefined
  }
}

/** `tokenKey`: the key derived from the deployment token, when the worker has it. */
export const makeAttestationVerifier =
  (keySet: AttestationKeySet, tokenKey: Uint8Array | undefined, worker: string): AttestationVerifier =>
  async (token, nowMs) => {
    if (typeof token !== "string") return undefined
    const keys = keySet.current()
    if (keys === undefined) return KEYS_UNKNOWN
    const kid = eddsaKid(token)
    if (kid !== undefined) {
      const looked = await keySet.lookup(kid)
      return looked?.kids.has(kid) === true ? verifyAttestation(token, looked.verificationKeys, worker, nowMs) : undefined
    }
    return keys.kids.size === 0 && tokenKey !== undefined ? verifyAttestation(token, tokenKey, worker, nowMs) : undefined
  }

/** `key`: HS256 with this secret, or EdDSA with a key of this set. */
export const verifyAttestation = async (
  token: string | Array<string> | undefined,
  key: Uint8Array | JWTVerifyGetKey,
  worker: string,
  nowMs: number
): Promise<Attested | undefined> => {
  if (typeof token !== "string") return undefined
  try {
    const options: JWTVerifyOptions = {
      issuer: PINBOARD_ISSUER,
      audience: worker,
      requiredClaims: ["exp", "iat"],
      clockTolerance: CLOCK_TOLERANCE_S,
      currentDate: new Date(nowMs)
    }
    const { payload } =
      key instanceof Uint8Array
        ? await jwtVerify(token, key, { ...options, algorithms: ["HS256"] })
        : await jwtVerify(token, key, { ...options, algorithms: ["EdDSA"] })
    const { ns, id, epoch, depth, sub, scope, caller, env, host }: Partial<Record<keyof AttestationPayload, unknown>> = payload
    if (typeof ns !== "string" || typeof id !== "string" || typeof epoch !== "string" || typeof depth !== "number") return undefined
    if (env !== undefined && typeof env !== "string") return undefined
    return {
      env: env ?? "",
      namespace: ns,
      id,
      epoch,
      depth,
      subject: typeof sub === "string" ? sub : undefined,
      scopes: typeof scope === "string" ? scope.split(" ").filter((s) => s !== "") : [],
      caller: typeof caller === "string" ? caller : undefined,
      hostname: typeof host === "string" ? host : undefined
    }
  } catch {
    return undefined
  }
}
