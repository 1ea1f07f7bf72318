// Pinboard-Attestation (docs/config.md): the key is HKDF-SHA256 of the deployment token, the token
// an HS256 JWS with exactly the listed claims; or, with attestation keys, an EdDSA JWS naming its
// key's kid. Verified here with jose and WebCrypto, which share no code with the signer.
import { createPrivateKey, generateKeyPairSync, webcrypto } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { calculateJwkThumbprint, decodeProtectedHeader, importJWK, jwtVerify, SignJWT } from "jose"
import { makeAttestationSigner } from "../../src/auth/Attestation.js"
import { attestationKey } from "../../src/contract/AttestationKey.js"

const TOKEN = "deployment-token"
const NOW_MS = 1_800_000_000_123

const hkdfByWebCrypto = async (token: string): Promise<Uint8Array> => {
  const material = await webcrypto.subtle.importKey("raw", new TextEncoder().encode(token), "HKDF", false, ["deriveBits"])
  const bits = await webcrypto.subtle.deriveBits(
    { name: "HKDF", hash: "SHA-256", salt: new Uint8Array(0), info: new TextEncoder().encode("pinboard attestation v1") },
    material,
    256
  )
  return new Uint8Array(bits)
}

const HS256_KEY = { alg: "HS256", secret: attestationKey(TOKEN) } as const

const base = { worker: "w1", namespace: "/threads", id: "t_8f2a", epoch: "17", depth: 0, principal: undefined, caller: undefined }

describe("the attestation key", () => {
  it("is HKDF-SHA256(token, salt empty, info 'pinboard attestation v1'), 32 bytes", async () => {
    const key = attestationKey(TOKEN)
    expect(key.length).toBe(32)
    expect(Buffer.from(key).equals(Buffer.from(await hkdfByWebCrypto(TOKEN)))).toBe(true)
    expect(Buffer.from(attestationKey("other")).equals(Buffer.from(key))).toBe(false)
  })
})

describe("Pinboard-Attestation", () => {
  const sign = makeAttestationSigner(HS256_KEY)

  it("an outside request: HS256, exactly iss, aud, iat, exp = iat + 60, ns, id, epoch (a string), depth 0", async () => {
    const token = sign(base, NOW_MS)
    expect(decodeProtectedHeader(token).alg).toBe("HS256")
    const { payload } = await jwtVerify(token, await hkdfByWebCrypto(TOKEN), {
      algorithms: ["HS256"],
      currentDate: new Date(NOW_MS),
      issuer: "pinboard",
      audience: "w1"
    })
    expect(payload).toEqual({ iss: "pinboard", aud: "w1", iat: 1_800_000_000, exp: 1_800_000_060, ns: "/threads", id: "t_8f2a", epoch: "17", depth: 0 })
  })

  it("carries the principal (sub, scope) and the caller when known", async () => {
    const token = sign(
      { ...base, depth: 3, principal: { subject: "alice", scopes: ["threads", "read"] }, caller: "/rooms/r1" },
      NOW_MS
    )
    const { payload } = await jwtVerify(token, attestationKey(TOKEN), { currentDate: new Date(NOW_MS) })
    expect(payload).toMatchObject({ sub: "alice", scope: "threads read", caller: "/rooms/r1", depth: 3 })
  })

  it("in hostname-aware mode carries the placement's env and the request's host (docs/config.md)", async () => {
    const token = sign({ ...base, hostname: { env: "prod", host: "docs.example" } }, NOW_MS)
    const { payload } = await jwtVerify(token, attestationKey(TOKEN), { currentDate: new Date(NOW_MS) })
    expect(payload).toMatchObject({ env: "prod", host: "docs.example" })
  })

  it("leaves sub out for a principal without a subject", async () => {
    const token = sign({ ...base, principal: { subject: undefined, scopes: [] } }, NOW_MS)
    const { payload } = await jwtVerify(token, attestationKey(TOKEN), { currentDate: new Date(NOW_MS) })
    expect(payload.sub).toBeUndefined()
    expect(payload.scope).toBe("")
  })

  it("does not verify under another deployment's key", async () => {
    await expect(jwtVerify(sign(base, NOW_MS), attestationKey("another-token"), { currentDate: new Date(NOW_MS) })).rejects.toThrow()
  })

  it("a token kept for the second is the token signed afresh: the same claims, the same iat", async () => {
    const fresh = makeAttestationSigner(HS256_KEY)
    const first = fresh(base, NOW_MS)
    // Later in the same second: kept; equal to what a signer that never saw it signs.
    expect(fresh(base, NOW_MS + 800)).toBe(first)
    expect(makeAttestationSigner(HS256_KEY)(base, NOW_MS + 800)).toBe(first)
    // The next second, another epoch, another depth or another worker: another token.
    const next = fresh(base, NOW_MS + 1_000)
    expect(next).not.toBe(first)
    const { payload } = await jwtVerify(next, attestationKey(TOKEN), { currentDate: new Date(NOW_MS + 1_000) })
    expect(payload.iat).toBe(1_800_000_001)
    for (const other of [{ ...base, epoch: "18" }, { ...base, depth: 1 }, { ...base, worker: "w2" }, { ...base, id: "t_other" }]) {
      const token = fresh(other, NOW_MS + 1_000)
      expect(token).not.toBe(next)
      expect(token).toBe(makeAttestationSigner(HS256_KEY)(other, NOW_MS + 1_000))
    }
  })

  it("forwards with a principal, a caller or a hostname are kept under their whole claims: never another's token", async () => {
    const fresh = makeAttestationSigner(HS256_KEY)
    fresh(base, NOW_MS)
    const alice = fresh({ ...base, principal: { subject: "alice", scopes: ["a"] } }, NOW_MS)
    const bob = fresh({ ...base, principal: { subject: "bob", scopes: ["a"] } }, NOW_MS)
    const called = fresh({ ...base, caller: "/rooms/r1" }, NOW_MS)
    const hosted = fresh({ ...base, hostname: { env: "prod", host: "docs.example" } }, NOW_MS)
    const verify = async (token: string) => (await jwtVerify(token, attestationKey(TOKEN), { currentDate: new Date(NOW_MS) })).payload
    expect((await verify(alice)).sub).toBe("alice")
    expect((await verify(bob)).sub).toBe("bob")
    expect((await verify(called)).caller).toBe("/rooms/r1")
    expect((await verify(hosted)).host).toBe("docs.example")
    expect((await verify(fresh(base, NOW_MS))).sub).toBeUndefined()
  })

  it("the same principal within one second gets the kept token; subjects that only differ where a separator could hide do not", async () => {
    const fresh = makeAttestationSigner(HS256_KEY)
    const alice = { ...base, principal: { subject: "alice", scopes: ["a", "b"] } }
    expect(fresh(alice, NOW_MS)).toBe(fresh(alice, NOW_MS + 800))
    expect(fresh(alice, NOW_MS + 1000)).not.toBe(fresh(alice, NOW_MS))
    const verify = async (token: string) => (await jwtVerify(token, attestationKey(TOKEN), { currentDate: new Date(NOW_MS) })).payload
    const odd = await verify(fresh({ ...base, principal: { subject: "alice\nb", scopes: ["a"] } }, NOW_MS))
    const even = await verify(fresh({ ...base, principal: { subject: "alice", scopes: ["b\na"] } }, NOW_MS))
    expect([odd.sub, odd.scope, even.sub, even.scope]).toEqual(["alice\nb", "a", "alice", "b\na"])
  })

  it("two callers, or two hostnames, of one placement within one second each get their own token", async () => {
    const fresh = makeAttestationSigner(HS256_KEY)
    const verify = async (token: string) => (await jwtVerify(token, attestationKey(TOKEN), { currentDate: new Date(NOW_MS) })).payload
    expect((await verify(fresh({ ...base, caller: "/rooms/r1" }, NOW_MS))).caller).toBe("/rooms/r1")
    expect((await verify(fresh({ ...base, caller: "/rooms/r2" }, NOW_MS + 1))).caller).toBe("/rooms/r2")
    expect((await verify(fresh({ ...base, hostname: { env: "prod", host: "a.example" } }, NOW_MS))).host).toBe("a.example")
    expect((await verify(fresh({ ...base, hostname: { env: "prod", host: "b.example" } }, NOW_MS + 1))).host).toBe("b.example")
  })
})

describe("Pinboard-Attestation signed with an attestation key (EdDSA)", () => {
  const pair = generateKeyPairSync("ed25519")
  const jwk = { ...pair.publicKey.export({ format: "jwk" }), alg: "EdDSA", use: "sig" }
  const kidOf = () => calculateJwkThumbprint(jwk, "sha256")
  const signerOf = async () => makeAttestationSigner({ alg: "EdDSA", kid: await kidOf(), privateKey: pair.privateKey })
  const verify = async (token: string, nowMs = NOW_MS) =>
    (await jwtVerify(token, await importJWK(jwk, "EdDSA"), { algorithms: ["EdDSA"], currentDate: new Date(nowMs), issuer: "pinboard" })).payload

  it("verifies against the public JWK with the claims of an HS256 attestation, its header naming the kid", async () => {
    const sign = await signerOf()
    const token = sign(base, NOW_MS)
    expect(decodeProtectedHeader(token)).toEqual({ alg: "EdDSA", typ: "JWT", kid: await kidOf() })
    expect(Object.keys(JSON.parse(Buffer.from(token.split(".")[0]!, "base64url").toString()))).toEqual(["alg", "typ", "kid"])
    expect(await verify(token)).toEqual({ iss: "pinboard", aud: "w1", iat: 1_800_000_000, exp: 1_800_000_060, ns: "/threads", id: "t_8f2a", epoch: "17", depth: 0 })
    expect(
      await verify(sign({ ...base, depth: 3, principal: { subject: "alice", scopes: ["threads", "read"] }, caller: "/rooms/r1", hostname: { env: "prod", host: "docs.example" } }, NOW_MS))
    ).toMatchObject({ sub: "alice", scope: "threads read", caller: "/rooms/r1", depth: 3, env: "prod", host: "docs.example" })
  })

  it("does not verify as HS256 with the token-derived key, nor under another key pair", async () => {
    const token = (await signerOf())(base, NOW_MS)
    await expect(jwtVerify(token, attestationKey(TOKEN), { currentDate: new Date(NOW_MS) })).rejects.toThrow()
    await expect(jwtVerify(token, attestationKey(TOKEN), { algorithms: ["HS256"], currentDate: new Date(NOW_MS) })).rejects.toThrow()
    const other = { ...generateKeyPairSync("ed25519").publicKey.export({ format: "jwk" }), alg: "EdDSA" }
    await expect(jwtVerify(token, await importJWK(other, "EdDSA"), { currentDate: new Date(NOW_MS) })).rejects.toThrow()
  })

  it("a token kept for the second is the token signed afresh; the next second gets another", async () => {
    const fresh = await signerOf()
    const first = fresh(base, NOW_MS)
    expect(fresh(base, NOW_MS + 800)).toBe(first)
    expect((await signerOf())(base, NOW_MS + 800)).toBe(first)
    const next = fresh(base, NOW_MS + 1_000)
    expect(next).not.toBe(first)
    expect((await verify(next, NOW_MS + 1_000)).iat).toBe(1_800_000_001)
  })

  it("Ed25519 signatures are deterministic: RFC 8037's example key signs this token, as jose does", async () => {
    const privateKey = createPrivateKey({
      key: { kty: "OKP", crv: "Ed25519", d: "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" },
      format: "jwk"
    })
    const kid = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
    const token = makeAttestationSigner({ alg: "EdDSA", kid, privateKey })(base, NOW_MS)
    expect(token).toBe(FIXED_EDDSA_TOKEN)
    const byJose = await new SignJWT({ iss: "pinboard", aud: "w1", iat: 1_800_000_000, exp: 1_800_000_060, ns: "/threads", id: "t_8f2a", epoch: "17", depth: 0 })
      .setProtectedHeader({ alg: "EdDSA", typ: "JWT", kid })
      .sign(privateKey)
    expect(token).toBe(byJose)
  })
})

// The header, the claims of `base` at NOW_MS, and the signature, base64url.
const FIXED_EDDSA_TOKEN = [
  "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCIsImtpZCI6ImtQcktfcW14VldhWVZBOXd3QkY2SXVvM3ZWeno3VHhIQ1R3WEJ5Z3JTNGsifQ",
  "eyJpc3MiOiJwaW5ib2FyZCIsImF1ZCI6IncxIiwiaWF0IjoxODAwMDAwMDAwLCJleHAiOjE4MDAwMDAwNjAsIm5zIjoiL3RocmVhZHMiLCJpZCI6InRfOGYyYSIsImVwb2NoIjoiMTciLCJkZXB0aCI6MH0",
  "rFRaM4uzYkv0eEzQ_D1867Y6jYzdiTlQVlJT7UMpwDsuP3KcmWBcU1-7d19UzeZTabmyZzc1YuEPuoHjJeFjCw"
].join(".")
