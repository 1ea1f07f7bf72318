// Pinboard-Caller verification (docs/config.md): signature, audience, lifetime and claim shapes;
// expiry with the 5 s tolerance, at the time given (the caller passes the Clock's).
import { describe, expect, it } from "@effect/vitest"
import { SignJWT, type JWTPayload } from "jose"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import { parseInstance, verifyCallerToken } from "../../src/auth/CallerToken.js"

const KEY = attestationKey("deployment-token")
const NOW_S = 1_800_000_000
const NOW_MS = NOW_S * 1000

const claims = (overrides: JWTPayload = {}): JWTPayload => ({
  iss: "w1",
  aud: "pinboard",
  sub: "/threads/t1",
  epoch: "7",
  depth: 2,
  iat: NOW_S,
  exp: NOW_S + 60,
  ...overrides
})

const without = (name: string): JWTPayload => {
  const { [name]: _, ...rest } = claims()
  return rest
}

const mint = (payload: JWTPayload, key: Uint8Array = KEY, alg = "HS256") => new SignJWT(payload).setProtectedHeader({ alg }).sign(key)

describe("verifyCallerToken", () => {
  it("accepts a well-formed token and reads the caller", async () => {
    expect(await verifyCallerToken(await mint(claims()), KEY, NOW_MS)).toEqual({
      worker: "w1",
      namespace: "/threads",
      id: "t1",
      epoch: "7",
      env: "",
      depth: 2
    })
  })

  it("reads the caller's env in hostname-aware mode; an env that is not a string is invalid", async () => {
    expect(await verifyCallerToken(await mint(claims({ env: "prod" })), KEY, NOW_MS)).toMatchObject({ env: "prod" })
    expect(await verifyCallerToken(await mint(claims({ env: 3 })), KEY, NOW_MS)).toBe("invalid")
  })

  it("an epoch of 40 digits is accepted: the longest the registry takes", async () => {
    const epoch = "9".repeat(40)
    expect(await verifyCallerToken(await mint(claims({ epoch })), KEY, NOW_MS)).toMatchObject({ epoch })
  })

  it("expiry: accepted less than 5 s past exp, expired from then on", async () => {
    const token = await mint(claims({ iat: NOW_S - 60, exp: NOW_S }))
    expect(await verifyCallerToken(token, KEY, NOW_MS + 4_999)).toMatchObject({ worker: "w1" })
    expect(await verifyCallerToken(token, KEY, NOW_MS + 5_000)).toBe("expired")
  })

  it.each([
    ["another key", async () => mint(claims(), attestationKey("other"))],
    ["audience not pinboard", async () => mint(claims({ aud: "w2" }))],
    ["lifetime over 60 s", async () => mint(claims({ exp: NOW_S + 61 }))],
    ["no exp", async () => mint(without("exp"))],
    ["no iat", async () => mint(without("iat"))],
    ["no iss", async () => mint(without("iss"))],
    ["sub without an id", async () => mint(claims({ sub: "/threads" }))],
    ["sub with a bad id", async () => mint(claims({ sub: "/threads/a b" }))],
    ["epoch a number", async () => mint(claims({ epoch: 7 }))],
    // The one epoch form (contract/Epochs.ts): no leading zeros, at most 40 digits.
    ["epoch with leading zeros", async () => mint(claims({ epoch: "007" }))],
    ["epoch 00", async () => mint(claims({ epoch: "00" }))],
    ["epoch of 41 digits", async () => mint(claims({ epoch: "1" + "0".repeat(40) }))],
    ["depth negative", async () => mint(claims({ depth: -1 }))],
    ["depth not an integer", async () => mint(claims({ depth: 1.5 }))],
    ["HS512", async () => mint(claims(), KEY, "HS512")],
    ["not yet valid", async () => mint(claims({ nbf: NOW_S + 60 }))],
    ["garbage", async () => "a.b.c"],
    ["alg none", async () => `${Buffer.from('{"alg":"none"}').toString("base64url")}.${Buffer.from(JSON.stringify(claims())).toString("base64url")}.`]
  ])("rejects as invalid: %s", async (_, token) => {
    expect(await verifyCallerToken(await token(), KEY, NOW_MS)).toBe("invalid")
  })
})

describe("parseInstance", () => {
  it("splits <ns>/<id> with the namespace's slash kept", () => {
    expect(parseInstance("/threads/t_8f2a")).toEqual({ namespace: "/threads", id: "t_8f2a" })
    expect(parseInstance("/threads/a/b")).toBeUndefined()
    expect(parseInstance("threads/t1")).toBeUndefined()
    expect(parseInstance("/threads/")).toBeUndefined()
  })
})
