// The remote JWKS cache of a jwt provider, on TestClock: fetched on first use, kept for
// 10 minutes, refetched on an unknown kid at most once per 30 s, a fetch limited to 3 s,
// and an outage failing closed without queueing requests behind it.
import { generateKeyPairSync } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { exportJWK, type JWK } from "jose"
import { makeRemoteJwks, type FetchJwks } from "../../src/auth/Jwks.js"

const URL = "https://id.example/jwks.json"
const jwkOf = async (kid: string): Promise<JWK> => ({
  ...(await exportJWK(generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey)),
  kid,
  alg: "RS256"
})
const K1 = await jwkOf("k1")
const K2 = await jwkOf("k2")
const header = (kid: string) => ({ alg: "RS256", kid })

/** A JWKS endpoint the test controls: what it serves, and how often it was asked. */
const endpoint = (initial: ReadonlyArray<JWK>) => {
  const state = { keys: initial as ReadonlyArray<JWK> | "down", fetches: 0 }
  const fetchJwks: FetchJwks = async () => {
    state.fetches++
    if (state.keys === "down") throw new Error("connection refused")
    return { keys: state.keys }
  }
  return { state, fetchJwks }
}

const found = (effect: Effect.Effect<unknown, unknown>) => Effect.map(Effect.exit(effect), Exit.isSuccess)

describe("remote JWKS", () => {
  it.effect("fetched on first use, then served from the cache", () =>
    Effect.gen(function* () {
      const { state, fetchJwks } = endpoint([K1])
      const jwks = yield* makeRemoteJwks(URL, fetchJwks)
      expect(state.fetches).toBe(0)
      expect(yield* found(jwks.keyFor(header("k1")))).toBe(true)
      expect(yield* found(jwks.keyFor(header("k1")))).toBe(true)
      expect(state.fetches).toBe(1)
    })
  )

  it.effect("an unknown kid refetches, at most once per 30 s", () =>
    Effect.gen(function* () {
      const { state, fetchJwks } = endpoint([K1])
      const jwks = yield* makeRemoteJwks(URL, fetchJwks)
      yield* jwks.keyFor(header("k1"))
      state.keys = [K2]
      yield* TestClock.adjust("10 seconds")
      expect(yield* found(jwks.keyFor(header("k2")))).toBe(false)
      expect(state.fetches).toBe(1)
      yield* TestClock.adjust("20 seconds")
      expect(yield* found(jwks.keyFor(header("k2")))).toBe(true)
      expect(state.fetches).toBe(2)
      // k1 rotated out: no new fetch within the cooldown.
      expect(yield* found(jwks.keyFor(header("k1")))).toBe(false)
      expect(state.fetches).toBe(2)
    })
  )

  it.effect("refetched once the cached set is 10 minutes old", () =>
    Effect.gen(function* () {
      const { state, fetchJwks } = endpoint([K1])
      const jwks = yield* makeRemoteJwks(URL, fetchJwks)
      yield* jwks.keyFor(header("k1"))
      yield* TestClock.adjust("9 minutes")
      yield* jwks.keyFor(header("k1"))
      expect(state.fetches).toBe(1)
      yield* TestClock.adjust("1 minute")
      yield* jwks.keyFor(header("k1"))
      expect(state.fetches).toBe(2)
    })
  )

  it.effect("an outage fails closed, asks again after 1 s, and recovers", () =>
    Effect.gen(function* () {
      const { state, fetchJwks } = endpoint([K1])
      state.keys = "down"
      const jwks = yield* makeRemoteJwks(URL, fetchJwks)
      expect(yield* found(jwks.keyFor(header("k1")))).toBe(false)
      expect(yield* found(jwks.keyFor(header("k1")))).toBe(false)
      expect(state.fetches).toBe(1)
      state.keys = [K1]
      yield* TestClock.adjust("1 second")
      expect(yield* found(jwks.keyFor(header("k1")))).toBe(true)
      expect(state.fetches).toBe(2)
    })
  )

  it.effect("a fetch that does not answer fails after 3 s", () =>
    Effect.gen(function* () {
      const jwks = yield* makeRemoteJwks(URL, () => new Promise(() => {}))
      const fiber = yield* Effect.forkChild(Effect.exit(jwks.keyFor(header("k1"))))
      yield* TestClock.adjust("2999 millis")
      expect(fiber.pollUnsafe()).toBeUndefined()
      yield* TestClock.adjust("1 millis")
      expect(Exit.isFailure(yield* Fiber.join(fiber))).toBe(true)
    })
  )

  it.effect("concurrent first uses share one fetch", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      let fetches = 0
      const jwks = yield* makeRemoteJwks(URL, async () => {
        fetches++
        await Effect.runPromise(Deferred.await(gate))
        return { keys: [K1] }
      })
      const fibers = yield* Effect.forEach([1, 2, 3], () => Effect.forkChild(jwks.keyFor(header("k1"))))
      yield* Effect.yieldNow
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.joinAll(fibers)
      expect(fetches).toBe(1)
    })
  )
})
