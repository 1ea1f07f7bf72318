// `Pinboard-Caller` per incarnation (docs/worker.md "Calls between instances"): when the
// register answer carries a `callerKey`, the worker signs its caller tokens HS256 with that
// key, the JWS header's `kid` naming the incarnation; after a lost lease and a new
// registration, the new incarnation's key and kid. Without a callerKey, the key derived from
// the deployment token and no kid, as before. On TestClock, against a stand-in of Pinboard
// that records the calls.
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import { decodeProtectedHeader, jwtVerify } from "jose"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import { defineInstance } from "../../src/worker/Definition.js"
import { makeWorker } from "../../src/worker/Worker.js"
import { registryStandIn, type RegistryStandIn } from "../support/RegistryStandIn.js"
import { ed25519Key, signTestAttestation, type TestAttestationKey } from "../support/TestAttestations.js"
import { until } from "../support/Turns.js"

const TOKEN = "caller-key-test-token"
const LEASE_MS = 3000

const caller = defineInstance({
  activate: () => ({}),
  routes: {
    "POST /call": async (request, res) => {
      const answer = await request.call("/counters", "callee", "/x")
      res.end(String(answer.status))
    }
  }
})

/** A worker against the stand-in, registered; `callFrom(epoch)` has instance c1 at that epoch call another, and gives the caller token sent. */
const setup = (standIn: RegistryStandIn, signing: TestAttestationKey) =>
  Effect.gen(function* () {
    const worker = yield* makeWorker({ pinboard: standIn.url, token: TOKEN, worker: "w1", instances: { "/counters": caller }, log: () => {} })
    yield* worker.registered
    const callFrom = (epoch: string) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const attestation = yield* Effect.promise(() => signTestAttestation(signing, { worker: "w1", namespace: "/counters", id: "c1", epoch }, now))
        const status = yield* Effect.promise(() =>
          fetch(`${worker.url}/counters/c1/call`, { method: "POST", headers: { "pinboard-attestation": attestation } }).then((r) => r.text())
        )
        expect(status).toBe("200")
        return String(standIn.seen.filter((r) => r.path === "/counters/callee/x").at(-1)!.headers["pinboard-caller"])
      })
    return { worker, callFrom }
  })

const verifiedWith = (token: string, secret: Uint8Array) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    Effect.promise(() =>
      jwtVerify(token, secret, { algorithms: ["HS256"], audience: "pinboard", currentDate: new Date(now) }).then(
        ({ payload }) => payload,
        () => undefined
      )
    )
  )

const keyOf = (callerKey: string | undefined) => new Uint8Array(Buffer.from(callerKey!, "base64url"))

describe("caller tokens", () => {
  it.effect("signed with the register answer's callerKey, kid the incarnation; the new one's after a re-registration", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      const key = yield* Effect.promise(ed25519Key)
      standIn.state.keys = [key.publicJwk]
      standIn.state.callerKeys = true
      const { worker, callFrom } = yield* setup(standIn, { alg: "EdDSA", key })
      const first = yield* callFrom("5")
      expect(decodeProtectedHeader(first)).toEqual({ alg: "HS256", typ: "JWT", kid: "inc-1" })
      const firstKey = keyOf(standIn.registrations[0]!.callerKey)
      expect(yield* verifiedWith(first, firstKey)).toMatchObject({ iss: "w1", aud: "pinboard", sub: "/counters/c1", epoch: "5", depth: 0 })
      expect(yield* verifiedWith(first, attestationKey(TOKEN))).toBeUndefined()

      // The lease is lost (410): the worker registers again, as inc-2 with a key of its own.
      standIn.state.loseLease = true
      yield* TestClock.adjust(LEASE_MS / 3)
      yield* until(() => standIn.registrations.length === 2 && worker.healthy(), "the second registration")
      const second = yield* callFrom("6")
      expect(decodeProtectedHeader(second)).toEqual({ alg: "HS256", typ: "JWT", kid: "inc-2" })
      expect(yield* verifiedWith(second, keyOf(standIn.registrations[1]!.callerKey))).toMatchObject({ sub: "/counters/c1", epoch: "6" })
      expect(yield* verifiedWith(second, firstKey)).toBeUndefined()
    })
  )

  it.effect("without a callerKey: the token-derived key and no kid, as before", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      const { callFrom } = yield* setup(standIn, { alg: "HS256", secret: attestationKey(TOKEN) })
      const token = yield* callFrom("5")
      expect(decodeProtectedHeader(token)).toEqual({ alg: "HS256", typ: "JWT" })
      expect(yield* verifiedWith(token, attestationKey(TOKEN))).toMatchObject({ iss: "w1", sub: "/counters/c1", epoch: "5" })
    })
  )
})
