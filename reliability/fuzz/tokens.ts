// JWTs and Pinboard-Caller tokens for the JWS and attestation inputs: signed right (HS256 with
// the provider's secret, or the HKDF attestation key), signed wrong, unsigned, truncated,
// re-encoded, and mutated byte by byte.
import { createHmac, generateKeyPairSync, sign as rsaSign } from "node:crypto"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import { B64URL_ALPHABET, type Rng } from "../prng.js"
import { JWT_AUDIENCE, JWT_ISSUER, JWT_SECRET, TOKEN } from "./fleet.js"

export const b64u = (value: unknown): string =>
  Buffer.from(typeof value === "string" ? value : Buffer.isBuffer(value) ? value : JSON.stringify(value)).toString("base64url")

export const nowS = (): number => Math.floor(Date.now() / 1000)

export type HsAlg = "HS256" | "HS384" | "HS512"
const HASH: Record<HsAlg, string> = { HS256: "sha256", HS384: "sha384", HS512: "sha512" }

/** An HMAC-signed JWS over the JSON (or raw text) header and payload. */
export const signHs = (key: Uint8Array | string, header: unknown, payload: unknown, alg: HsAlg = "HS256"): string => {
  const input = `${b64u(header)}.${b64u(payload)}`
  return `${input}.${createHmac(HASH[alg], key).update(input).digest("base64url")}`
}

const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 })
export const signRs256 = (header: unknown, payload: unknown): string => {
  const input = `${b64u(header)}.${b64u(payload)}`
  return `${input}.${rsaSign("sha256", Buffer.from(input), rsa.privateKey).toString("base64url")}`
}

/** Claims the `hs` provider accepts. */
export const userClaims = (overrides: Record<string, unknown> = {}): Record<string, unknown> => {
  const now = nowS()
  return { iss: JWT_ISSUER, aud: JWT_AUDIENCE, sub: "fuzz-user", scope: "fuzz read", iat: now, exp: now + 600, ...overrides }
}

export const userToken = (overrides: Record<string, unknown> = {}, alg: HsAlg = "HS256"): string =>
  signHs(JWT_SECRET, { alg, typ: "JWT" }, userClaims(overrides), alg)

export const ATTESTATION_KEY = attestationKey(TOKEN)

export interface Placed {
  readonly namespace: string
  readonly id: string
  readonly worker: string
  readonly epoch: string
}

/** Pinboard-Caller claims (docs/config.md) for a placed instance. */
export const callerClaims = (placed: Placed, overrides: Record<string, unknown> = {}): Record<string, unknown> => {
  const now = nowS()
  return {
    iss: placed.worker,
    aud: "pinboard",
    sub: `${placed.namespace}/${placed.id}`,
    epoch: placed.epoch,
    depth: 0,
    iat: now,
    exp: now + 60,
    ...overrides
  }
}

export const callerToken = (claims: Record<string, unknown>, key: Uint8Array | string = ATTESTATION_KEY, alg: HsAlg = "HS256"): string =>
  signHs(key, { alg, typ: "JWT" }, claims, alg)

// ---- broken tokens --------------------------------------------------------------------------

/** A JSON value of a surprising type for a claim. */
export const oddValue = (rng: Rng): unknown =>
  rng.pick<() => unknown>([
    () => null,
    () => true,
    () => rng.int(1e6),
    () => -1,
    () => 1.5,
    () => 1e308,
    () => -1e308,
    () => "",
    () => "x".repeat(rng.range(1, 3000)),
    () => [],
    () => [rng.chars(5, B64URL_ALPHABET)],
    () => ({}),
    () => ({ nested: { deeper: [1, 2, 3] } }),
    () => String(rng.int(1e6)),
    () => "\u0000\u2028\ud800",
    () => "ünïcödé ✓ 🙂"
  ])()

/** A token broken in one of the ways a JWS can be. */
export const brokenJws = (rng: Rng, good: string, key: Uint8Array | string, claims: Record<string, unknown>): { token: string; how: string } => {
  const [h, p, s] = good.split(".") as [string, string, string]
  const choice = rng.int(22)
  switch (choice) {
    case 0:
      return { token: `${b64u({ alg: "none", typ: "JWT" })}.${p}.`, how: "alg none, no signature" }
    case 1:
      return { token: `${b64u({ alg: "none" })}.${p}.${s}`, how: "alg none, old signature" }
    case 2:
      return { token: signHs(key, { alg: "HS512", typ: "JWT" }, claims, "HS512"), how: "HS512 (not accepted)" }
    case 3:
      return { token: signHs(key, { alg: "HS384" }, claims, "HS384"), how: "HS384 (not accepted)" }
    case 4:
      return { token: signRs256({ alg: "RS256", typ: "JWT" }, claims), how: "RS256 by a stranger" }
    case 5:
      return { token: `${b64u({ alg: "RS256" })}.${p}.${s}`, how: "RS256 header over an HS256 signature" }
    case 6:
      return { token: `${h}.${p}`, how: "two segments" }
    case 7:
      return { token: `${h}.${p}.${s}.${s}`, how: "four segments" }
    case 8:
      return { token: `${h}.${p}.${s}.x.y`, how: "five segments (JWE-shaped)" }
    case 9:
      return { token: good.slice(0, rng.int(good.length)), how: "truncated" }
    case 10:
      return { token: `${h}.${p}.${s.slice(0, -2)}`, how: "signature cut" }
    case 11: {
      // Standard base64 of the same JSON: differs when it has `+`, `/` or padding; else pad it.
      const standard = Buffer.from(JSON.stringify(claims)).toString("base64")
      return { token: `${h}.${standard === p ? `${standard}==` : standard}.${s}`, how: "payload in standard base64" }
    }
    case 12:
      return { token: `${h}.${p}=.${s}`, how: "padding" }
    case 13:
      return { token: `${h}.${p}.${s}`.replace(/[A-Za-z]/, "+"), how: "a non-base64url character" }
    case 14:
      return { token: signHs(key, { alg: "HS256" }, "not json at all"), how: "payload not JSON" }
    case 15:
      return { token: signHs(key, "{\"alg\":\"HS256\"", claims), how: "header not JSON" }
    case 16:
      return { token: signHs(key, { alg: "HS256", crit: ["b64"], b64: false }, claims), how: "crit b64" }
    case 17:
      return { token: signHs(key, { alg: "HS256" }, [claims]), how: "payload an array" }
    case 18:
      return { token: signHs("the wrong key", { alg: "HS256" }, claims), how: "wrong key" }
    case 19:
      return { token: mutateText(rng, good, 1 + rng.int(4)), how: "mutated bytes" }
    case 20:
      return { token: `${h}.${p}.${s}`.split("").reverse().join(""), how: "reversed" }
    default:
      return { token: `${h}..${s}`, how: "empty payload" }
  }
}

/**
 * Replaces, inserts or deletes a few characters (printable ASCII, so a header can carry it);
 * the result always differs from the text. The last character is left alone: in a JWS it
 * carries the signature's padding bits, which base64url decoders ignore, so changing it may
 * change nothing.
 */
export const mutateText = (rng: Rng, text: string, edits: number): string => {
  let out = text
  for (let attempt = 0; out === text && attempt < 10; attempt++) {
    for (let i = 0; i < edits; i++) {
      const at = rng.int(Math.max(1, out.length - 1))
      const c = String.fromCharCode(rng.range(0x21, 0x7e))
      switch (rng.int(3)) {
        case 0:
          out = out.slice(0, at) + c + out.slice(at + 1)
          break
        case 1:
          out = out.slice(0, at) + c + out.slice(at)
          break
        default:
          out = out.slice(0, at) + out.slice(at + 1)
      }
    }
  }
  return out === text ? `${text}!` : out
}
