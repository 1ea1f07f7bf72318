// Pinboard-Attestation (docs/config.md): the key is HKDF-SHA256 of the deployment token, the token
// an HS256 JWS with exactly the listed claims. Verified here with jose and WebCrypto, which
// share no code with the signer.
import { webcrypto } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { decodeProtectedHeader, jwtVerify } from "jose"
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
  const sign = makeAttestationSigner(attestationKey(TOKEN))

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
    const fresh = makeAttestationSigner(attestationKey(TOKEN))
    const first = fresh(base, NOW_MS)
    // Later in the same second: kept; equal to what a signer that never saw it signs.
    expect(fresh(base, NOW_MS + 800)).toBe(first)
    expect(makeAttestationSigner(attestationKey(TOKEN))(base, NOW_MS + 800)).toBe(first)
    // The next second, another epoch, another depth or another worker: another token.
    const next = fresh(base, NOW_MS + 1_000)
    expect(next).not.toBe(first)
    const { payload } = await jwtVerify(next, attestationKey(TOKEN), { currentDate: new Date(NOW_MS + 1_000) })
    expect(payload.iat).toBe(1_800_000_001)
    for (const other of [{ ...base, epoch: "18" }, { ...base, depth: 1 }, { ...base, worker: "w2" }, { ...base, id: "t_other" }]) {
      const token = fresh(other, NOW_MS + 1_000)
      expect(token).not.toBe(next)
      expect(token).toBe(makeAttestationSigner(attestationKey(TOKEN))(other, NOW_MS + 1_000))
    }
  })

  it("forwards with a principal, a caller or a hostname are never answered from the kept tokens", async () => {
    const fresh = makeAttestationSigner(attestationKey(TOKEN))
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

  it("two callers, or two hostnames, of one placement within one second each get their own token", async () => {
    const fresh = makeAttestationSigner(attestationKey(TOKEN))
    const verify = async (token: string) => (await jwtVerify(token, attestationKey(TOKEN), { currentDate: new Date(NOW_MS) })).payload
    expect((await verify(fresh({ ...base, caller: "/rooms/r1" }, NOW_MS))).caller).toBe("/rooms/r1")
    expect((await verify(fresh({ ...base, caller: "/rooms/r2" }, NOW_MS + 1))).caller).toBe("/rooms/r2")
    expect((await verify(fresh({ ...base, hostname: { env: "prod", host: "a.example" } }, NOW_MS))).host).toBe("a.example")
    expect((await verify(fresh({ ...base, hostname: { env: "prod", host: "b.example" } }, NOW_MS + 1))).host).toBe("b.example")
  })
})
