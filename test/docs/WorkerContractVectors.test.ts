// The test vectors of docs/registry-api.md "Test vectors", checked against the code that makes and
// checks the same tokens, so the page a worker author in another language reads cannot drift
// from what Pinboard signs and accepts.
import { createPrivateKey, createPublicKey } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import { calculateJwkThumbprint, createLocalJWKSet, decodeProtectedHeader, importJWK, jwtVerify, type JWK } from "jose"
import { makeAttestationSigner, type AttestationClaims } from "../../src/auth/Attestation.js"
import { loadAttestationKeys } from "../../src/config/AttestationKeys.js"
import { verifyCallerToken } from "../../src/auth/CallerToken.js"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import type { AttestationPayload, CallerPayload } from "../../src/contract/Claims.js"
import { verifyAttestation } from "../../src/worker/Attestation.js"
import { mintCallerToken } from "../../src/worker/Call.js"

const PAGE = readFileSync(new URL("../../docs/registry-api.md", import.meta.url), "utf8")

/** Every `<!-- vector: name -->` and the fenced block right after it: its lines, without the last line break. */
const vectors = (page: string): ReadonlyMap<string, string> => {
  const found = new Map<string, string>()
  for (const [, name, value] of page.matchAll(/<!-- vector: (\S+) -->\n```[a-z]*\n([\s\S]*?)\n```/g)) {
    if (found.has(name!)) throw new Error(`vector ${name} given twice`)
    found.set(name!, value!)
  }
  return found
}

const VECTORS = vectors(PAGE)

const vector = (name: string): string => {
  const value = VECTORS.get(name)
  if (value === undefined) throw new Error(`docs/registry-api.md has no vector ${name}`)
  return value
}

/** A claims block, pretty-printed on the page, as the compact JSON that was signed (member order kept). */
const compact = (name: string): string => JSON.stringify(JSON.parse(vector(name)))

const payloadText = (token: string): string => Buffer.from(token.split(".")[1]!, "base64url").toString("utf8")

/** What Pinboard's signer is given for a forward whose attestation carries these claims. */
const claimsOf = (payload: AttestationPayload): AttestationClaims => ({
  worker: payload.aud,
  namespace: payload.ns,
  id: payload.id,
  epoch: payload.epoch,
  depth: payload.depth,
  principal: payload.scope === undefined ? undefined : { subject: payload.sub, scopes: payload.scope === "" ? [] : payload.scope.split(" ") },
  caller: payload.caller,
  hostname: payload.env === undefined || payload.host === undefined ? undefined : { env: payload.env, host: payload.host }
})

/** Within the second `iat` names, late in it: the signer counts whole seconds. */
const signedAtMs = (payload: { readonly iat: number }): number => payload.iat * 1000 + 741

const SECRET = attestationKey(vector("deployment-token"))

describe("docs/registry-api.md test vectors", () => {
  it("lists each vector the checks below read", () => {
    expect([...VECTORS.keys()].sort()).toEqual(
      [
        "attestation-key",
        "caller-claims",
        "caller-incarnation",
        "caller-key",
        "caller-token",
        "caller-token-derived",
        "deployment-token",
        "ed25519-private-key",
        "ed25519-public-jwk",
        "eddsa-attestation",
        "eddsa-claims",
        "hs256-attestation",
        "hs256-claims",
        "hs256-hostname-attestation",
        "hs256-hostname-claims"
      ].sort()
    )
  })

  it("the attestation key is attestationKey(deployment token)", () => {
    expect(Buffer.from(SECRET).toString("hex")).toBe(vector("attestation-key"))
  })

  describe.each(["hs256", "hs256-hostname"])("the HS256 attestation %s", (name) => {
    const token = vector(`${name}-attestation`)
    const payload: AttestationPayload = JSON.parse(vector(`${name}-claims`))

    it("is what Pinboard signs for those claims at that time", () => {
      const sign = makeAttestationSigner({ alg: "HS256", secret: SECRET })
      expect(sign(claimsOf(payload), signedAtMs(payload))).toBe(token)
    })

    it("carries exactly the claims block and the HS256 header", () => {
      expect(payloadText(token)).toBe(compact(`${name}-claims`))
      expect(decodeProtectedHeader(token)).toEqual({ alg: "HS256", typ: "JWT" })
    })

    it("is accepted by the worker library for its aud", async () => {
      const attested = await verifyAttestation(token, SECRET, payload.aud, signedAtMs(payload))
      expect(attested).toMatchObject({ namespace: payload.ns, id: payload.id, epoch: payload.epoch, depth: payload.depth })
    })
  })

  describe("the Ed25519 key pair", () => {
    const privateKey = createPrivateKey(vector("ed25519-private-key"))
    const jwk: JWK & { readonly kid: string } = JSON.parse(vector("ed25519-public-jwk"))

    it("the JWK is the private key's public key, its kid the RFC 7638 thumbprint", async () => {
      expect(privateKey.asymmetricKeyType).toBe("ed25519")
      const publicKey = { kty: "OKP", crv: "Ed25519", x: createPublicKey(privateKey).export({ format: "jwk" }).x! }
      expect(jwk).toEqual({ ...publicKey, kid: await calculateJwkThumbprint(publicKey, "sha256"), alg: "EdDSA", use: "sig" })
    })

    it("is what Pinboard loads from the PEM file and publishes", () => {
      const dir = mkdtempSync(join(tmpdir(), "pinboard-vectors-"))
      try {
        const path = join(dir, "attestation.pem")
        writeFileSync(path, `${vector("ed25519-private-key")}\n`)
        const [loaded] = Result.getOrThrow(loadAttestationKeys([path]))
        expect(loaded!.publicJwk).toEqual(jwk)
        expect(loaded!.kid).toBe(jwk.kid)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    })

    it("the EdDSA attestation is what Pinboard signs with that key, and verifies with the JWK", async () => {
      const token = vector("eddsa-attestation")
      const payload: AttestationPayload = JSON.parse(vector("eddsa-claims"))
      const sign = makeAttestationSigner({ alg: "EdDSA", kid: jwk.kid, privateKey })
      expect(sign(claimsOf(payload), signedAtMs(payload))).toBe(token)
      expect(payloadText(token)).toBe(compact("eddsa-claims"))
      expect(decodeProtectedHeader(token)).toEqual({ alg: "EdDSA", typ: "JWT", kid: jwk.kid })
      await expect(
        jwtVerify(token, await importJWK(jwk, "EdDSA"), { algorithms: ["EdDSA"], issuer: "pinboard", audience: payload.aud, currentDate: new Date(signedAtMs(payload)) })
      ).resolves.toBeDefined()
    })

    it("the EdDSA attestation is accepted by the worker library with the published set", async () => {
      const payload: AttestationPayload = JSON.parse(vector("eddsa-claims"))
      const attested = await verifyAttestation(vector("eddsa-attestation"), createLocalJWKSet({ keys: [jwk] }), payload.aud, signedAtMs(payload))
      expect(attested).toMatchObject({ namespace: payload.ns, id: payload.id, epoch: payload.epoch, depth: payload.depth })
    })
  })

  describe("the caller tokens", () => {
    const payload: CallerPayload = JSON.parse(vector("caller-claims"))
    const mintedAtMs = signedAtMs(payload)
    const expected = { worker: payload.iss, namespace: "/threads", id: "t_8f2a", epoch: payload.epoch, env: "", depth: payload.depth }

    it("deployment-token mode: the worker library mints it, Pinboard accepts it", async () => {
      const token = vector("caller-token-derived")
      const caller = { worker: payload.iss, env: "", namespace: expected.namespace, id: expected.id, epoch: payload.epoch, depth: payload.depth, hostname: undefined }
      expect(await mintCallerToken(caller, { secret: SECRET, kid: undefined }, mintedAtMs)).toBe(token)
      expect(payloadText(token)).toBe(compact("caller-claims"))
      expect(await verifyCallerToken(token, SECRET, mintedAtMs)).toEqual(expected)
    })

    it("key-pair mode: HS256 under the callerKey with kid = incarnation, accepted by jose and by Pinboard's verifier", async () => {
      const token = vector("caller-token")
      const callerKey = Buffer.from(vector("caller-key"), "base64url")
      expect(callerKey.length).toBe(32)
      expect(callerKey.toString("base64url")).toBe(vector("caller-key"))
      expect(decodeProtectedHeader(token)).toEqual({ alg: "HS256", typ: "JWT", kid: vector("caller-incarnation") })
      const caller = { worker: payload.iss, env: "", namespace: expected.namespace, id: expected.id, epoch: payload.epoch, depth: payload.depth, hostname: undefined }
      expect(await mintCallerToken(caller, { secret: callerKey, kid: vector("caller-incarnation") }, mintedAtMs)).toBe(token)
      expect(payloadText(token)).toBe(compact("caller-claims"))
      const { payload: verified } = await jwtVerify(token, callerKey, { algorithms: ["HS256"], audience: "pinboard", currentDate: new Date(mintedAtMs) })
      expect(verified).toEqual(payload)
      expect(await verifyCallerToken(token, callerKey, mintedAtMs)).toEqual(expected)
      expect(await verifyCallerToken(token, SECRET, mintedAtMs)).toBe("invalid")
    })
  })
})
