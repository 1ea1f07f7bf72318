// Calls from an instance (DESIGN 7): a request to another instance through Pinboard, carrying
// a `Pinboard-Caller` token that names the calling instance, its epoch and the depth of the
// request it is serving. Pinboard verifies it, checks the caller is still placed there, and
// forwards one level deeper.
import { SignJWT } from "jose"
import type { CallInstance } from "./Definition.js"

/** Caller tokens live this long (DESIGN 7: at most 60 s). */
const CALLER_TOKEN_TTL_S = 30

export interface Caller {
  readonly worker: string
  readonly namespace: string
  readonly id: string
  readonly epoch: string
  readonly depth: number
}

export const mintCallerToken = (caller: Caller, key: Uint8Array, nowMs: number): Promise<string> => {
  const iat = Math.floor(nowMs / 1000)
  return new SignJWT({ epoch: caller.epoch, depth: caller.depth })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuer(caller.worker)
    .setAudience("pinboard")
    .setSubject(`${caller.namespace}/${caller.id}`)
    .setIssuedAt(iat)
    .setExpirationTime(iat + CALLER_TOKEN_TTL_S)
    .sign(key)
}

export const makeCall =
  (pinboard: string, key: Uint8Array, now: () => number) =>
  (caller: Caller): CallInstance =>
  async (namespace, id, path, init = {}) => {
    const headers = new Headers(init.headers)
    headers.set("pinboard-caller", await mintCallerToken(caller, key, now()))
    const rest = path === "" || path.startsWith("/") || path.startsWith("?") ? path : `/${path}`
    return fetch(`${pinboard.replace(/\/+$/, "")}${namespace}/${encodeURIComponent(id)}${rest}`, { ...init, headers })
  }
