// One clock tolerance (contract/Claims.ts CLOCK_TOLERANCE_S, docs/config.md, docs/deploy.md
// "Clocks") for every token check: the worker's of an attestation, Pinboard's of a caller token
// and of a credential. Each accepts a token until CLOCK_TOLERANCE_S past its `exp`, none longer.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { TestClock } from "effect/testing"
import { SignJWT } from "jose"
import { makeAttestationSigner } from "../../src/auth/Attestation.js"
import { verifyCallerToken } from "../../src/auth/CallerToken.js"
import { makeProvider } from "../../src/auth/Providers.js"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import { ATTESTATION_TTL_S, CLOCK_TOLERANCE_S } from "../../src/contract/Claims.js"
import { verifyAttestation } from "../../src/worker/Attestation.js"

const KEY = attestationKey("deployment-token")
const NOW_S = 1_800_000_000
const EXP_S = NOW_S + 60
/** The last millisecond a token with exp EXP_S is still accepted at, and the first it is not. */
const LAST_MS = (EXP_S + CLOCK_TOLERANCE_S) * 1000 - 1
const FIRST_REFUSED_MS = (EXP_S + CLOCK_TOLERANCE_S) * 1000

describe("one clock tolerance for every token", () => {
  it("is 5 s (docs/config.md)", () => {
    expect(CLOCK_TOLERANCE_S).toBe(5)
  })

  it("the worker's check of Pinboard-Attestation", async () => {
    const sign = makeAttestationSigner({ alg: "HS256", secret: KEY })
    const claims = { worker: "w1", namespace: "/threads", id: "t1", epoch: "7", depth: 0, principal: undefined, caller: undefined }
    const token = sign(claims, (EXP_S - ATTESTATION_TTL_S) * 1000)
    expect(await verifyAttestation(token, KEY, "w1", LAST_MS)).toBeDefined()
    expect(await verifyAttestation(token, KEY, "w1", FIRST_REFUSED_MS)).toBeUndefined()
  })

  it("Pinboard's check of Pinboard-Caller", async () => {
    const token = await new SignJWT({ iss: "w1", aud: "pinboard", sub: "/threads/t1", epoch: "7", depth: 0, iat: NOW_S, exp: EXP_S })
      .setProtectedHeader({ alg: "HS256" })
      .sign(KEY)
    expect(await verifyCallerToken(token, KEY, LAST_MS)).toMatchObject({ worker: "w1" })
    expect(await verifyCallerToken(token, KEY, FIRST_REFUSED_MS)).toBe("expired")
  })

  it.effect("Pinboard's check of a jwt credential", () =>
    Effect.gen(function* () {
      const secret = "a-shared-secret-of-enough-length"
      const token = yield* Effect.promise(() =>
        new SignJWT({ sub: "alice", iat: NOW_S, exp: EXP_S }).setProtectedHeader({ alg: "HS256" }).sign(new TextEncoder().encode(secret))
      )
      const provider = yield* makeProvider({ type: "jwt", secret: Redacted.make(secret) })
      yield* TestClock.setTime(LAST_MS)
      expect(Option.isSome(yield* provider(token))).toBe(true)
      yield* TestClock.setTime(FIRST_REFUSED_MS)
      expect(Option.isNone(yield* provider(token))).toBe(true)
    })
  )
})
