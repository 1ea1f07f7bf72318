// Attestations as Pinboard signs them (docs/registry-api.md): EdDSA with a key of its set, the
// JWS header naming the key's `kid`, or HS256 with a secret (the token-derived key), for the
// worker library's tests. Signed with jose here, apart from Pinboard's own signer, so that a
// test can also sign what Pinboard never would (another key, a `kid` left out).
import { generateKeyPairSync, type KeyObject } from "node:crypto"
import { calculateJwkThumbprint, SignJWT, type JWK } from "jose"
import { ATTESTATION_TTL_S, PINBOARD_ISSUER } from "../../src/contract/Claims.js"

export interface TestSigningKey {
  readonly kid: string
  readonly privateKey: KeyObject
  /** As `GET /registry/keys` lists it. */
  readonly publicJwk: JWK
}

/** A fresh Ed25519 key pair; its `kid` the RFC 7638 thumbprint of the public key. */
export const ed25519Key = async (): Promise<TestSigningKey> => {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519")
  const { kty, crv, x } = publicKey.export({ format: "jwk" })
  const kid = await calculateJwkThumbprint({ kty: kty!, crv: crv!, x: x! }, "sha256")
  return { kid, privateKey, publicJwk: { kty: kty!, crv: crv!, x: x!, kid, alg: "EdDSA", use: "sig" } }
}

export interface TestPlacement {
  readonly worker: string
  readonly namespace: string
  readonly id: string
  readonly epoch: string
}

export type TestAttestationKey =
  | { readonly alg: "EdDSA"; readonly key: TestSigningKey; readonly kid?: string | undefined }
  | { readonly alg: "HS256"; readonly secret: Uint8Array }

/** `Pinboard-Attestation` for `placement` at depth 0; an EdDSA header names the key's kid unless `kid` says otherwise. */
export const signTestAttestation = (signing: TestAttestationKey, placement: TestPlacement, nowMs: number): Promise<string> => {
  const iat = Math.floor(nowMs / 1000)
  const jwt = new SignJWT({ ns: placement.namespace, id: placement.id, epoch: placement.epoch, depth: 0 })
    .setIssuer(PINBOARD_ISSUER)
    .setAudience(placement.worker)
    .setIssuedAt(iat)
    .setExpirationTime(iat + ATTESTATION_TTL_S)
  if (signing.alg === "HS256") return jwt.setProtectedHeader({ alg: "HS256", typ: "JWT" }).sign(signing.secret)
  return jwt.setProtectedHeader({ alg: "EdDSA", typ: "JWT", kid: signing.kid ?? signing.key.kid }).sign(signing.key.privateKey)
}
