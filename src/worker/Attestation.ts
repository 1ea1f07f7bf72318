// The worker's side of `Pinboard-Attestation` (docs/config.md): verified with jose against the key
// derived from the deployment token, for this worker (`aud`). Anything else did not come
// through Pinboard.
import { jwtVerify } from "jose"
import { CLOCK_TOLERANCE_S, PINBOARD_ISSUER, type AttestationPayload } from "../contract/Claims.js"
import type { RequestIdentity } from "./Definition.js"

export interface Attested extends RequestIdentity {
  /** The placement's env (hostname-aware mode); `""` when the token names none. */
  readonly env: string
  readonly namespace: string
  readonly id: string
  readonly epoch: string
}

export const verifyAttestation = async (
  token: string | Array<string> | undefined,
  key: Uint8Array,
  worker: string,
  nowMs: number
): Promise<Attested | undefined> => {
  if (typeof token !== "string") return undefined
  try {
    const { payload } = await jwtVerify(token, key, {
      algorithms: ["HS256"],
      issuer: PINBOARD_ISSUER,
      audience: worker,
      requiredClaims: ["exp", "iat"],
      clockTolerance: CLOCK_TOLERANCE_S,
      currentDate: new Date(nowMs)
    })
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
