// `Pinboard-Caller` (docs/config.md): the HS256 JWS a worker mints for a call from one of its
// instances. Verified with jose against the key derived from the deployment token, or with
// attestation keys against the key of the incarnation its `kid` names; the claims are then
// checked for shape. Whether the caller is still placed there is the attestation step's registry check.
import { decodeJwt, decodeProtectedHeader, errors, jwtVerify } from "jose"
import { CALLER_TOKEN_MAX_LIFETIME_S, CLOCK_TOLERANCE_S, PINBOARD_ISSUER, type CallerPayload } from "../contract/Claims.js"
import { isValidId, isValidNamespace } from "../Address.js"
import { isEpoch } from "../contract/Epochs.js"

/** The calling instance, as its token claims it. */
export interface CallerClaims {
  readonly worker: string
  readonly namespace: string
  readonly id: string
  readonly epoch: string
  /** The caller's placement env (hostname-aware mode, docs/config.md); "" when the token has none. */
  readonly env: string
  /** The depth of the request the caller is serving. */
  readonly depth: number
}

export type CallerTokenProblem = "invalid" | "expired"

/** `"<ns>/<id>"`, the namespace with its leading slash. */
export const parseInstance = (text: string): { readonly namespace: string; readonly id: string } | undefined => {
  const slash = text.indexOf("/", 1)
  if (slash === -1) return undefined
  const namespace = text.slice(0, slash)
  const id = text.slice(slash + 1)
  return isValidNamespace(namespace) && isValidId(id) ? { namespace, id } : undefined
}

const claimsOf = (payload: Record<string, unknown>): CallerClaims | undefined => {
  const { iss, sub, epoch, depth, iat, exp, env }: Partial<Record<keyof CallerPayload, unknown>> = payload
  if (typeof iss !== "string" || iss === "" || typeof sub !== "string" || typeof epoch !== "string") return undefined
  if (env !== undefined && typeof env !== "string") return undefined
  if (typeof depth !== "number" || !Number.isSafeInteger(depth) || depth < 0) return undefined
  if (typeof iat !== "number" || typeof exp !== "number" || exp > iat + CALLER_TOKEN_MAX_LIFETIME_S) return undefined
  const instance = parseInstance(sub)
  if (instance === undefined || !isEpoch(epoch)) return undefined
  return { worker: iss, namespace: instance.namespace, id: instance.id, epoch, env: env ?? "", depth }
}

/** Who a caller token says signed it, read before its signature can be checked: the key is that incarnation's. */
export interface NamedSigner {
  /** The header's `kid`. */
  readonly incarnation: string
  readonly worker: string
  readonly namespace: string
  readonly id: string
  readonly env: string
}

/** The signer a token names; undefined when it names none or is not a JWS at all. */
export const namedSigner = (token: string): NamedSigner | undefined => {
  try {
    const { kid } = decodeProtectedHeader(token)
    const { iss, sub, env } = decodeJwt(token)
    const instance = typeof sub === "string" ? parseInstance(sub) : undefined
    if (typeof kid !== "string" || kid === "" || typeof iss !== "string" || instance === undefined) return undefined
    if (env !== undefined && typeof env !== "string") return undefined
    return { incarnation: kid, worker: iss, ...instance, env: env ?? "" }
  } catch {
    return undefined
  }
}

export const verifyCallerToken = async (
  token: string,
  key: Uint8Array,
  nowMs: number
): Promise<CallerClaims | CallerTokenProblem> => {
  try {
    const { payload } = await jwtVerify(token, key, {
      algorithms: ["HS256"],
      audience: PINBOARD_ISSUER,
      requiredClaims: ["iss", "sub", "iat", "exp"],
      clockTolerance: CLOCK_TOLERANCE_S,
      currentDate: new Date(nowMs)
    })
    return claimsOf(payload) ?? "invalid"
  } catch (error) {
    return error instanceof errors.JWTExpired ? "expired" : "invalid"
  }
}
