// The worker verifies `Pinboard-Attestation` with the keys Pinboard publishes (docs/worker.md
// "Attestation keys"), on TestClock against a stand-in of the registry API: `GET
// /registry/keys` before the first registration; with keys, only an EdDSA token whose `kid` is
// in the set is accepted, and an HS256 token is refused even when signed with the key derived
// from the deployment token (what anyone holding that token, or a leaked worker's, could
// forge); without keys, HS256 as before. An unknown `kid` fetches the set again, at most once
// per 30 s, and the set is read again every 5 minutes.
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit } from "effect"
import { TestClock } from "effect/testing"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import { defineInstance } from "../../src/worker/Definition.js"
import { KEYS_REFRESH_MS, UNKNOWN_KID_COOLDOWN_MS } from "../../src/worker/AttestationKeySet.js"
import type { RegistryClient } from "../../src/worker/RegistryClient.js"
import { makeWorker, type WorkerOptions } from "../../src/worker/Worker.js"
import type { LogLine } from "../../src/worker/WorkerLog.js"
import { registryStandIn, type RegistryStandIn } from "../support/RegistryStandIn.js"
import { ed25519Key, signTestAttestation, type TestAttestationKey } from "../support/TestAttestations.js"
import { flush, until } from "../support/Turns.js"

const TOKEN = "attestation-keys-test-token"
/** Long enough that no clock step of these tests turns the lease unhealthy. */
const LEASE_MS = 600_000
const PLACEMENT = { worker: "w1", namespace: "/counters", id: "c1", epoch: "5" }
const HS256: TestAttestationKey = { alg: "HS256", secret: attestationKey(TOKEN) }

const counter = defineInstance({
  activate: () => ({ count: 0 }),
  routes: { "POST /increment": (request, res) => void res.end(String(++request.state.count)) },
  // Past every clock step here: no eviction releases the placement the requests name.
  idleTimeoutMs: 60 * 60_000
})

const keysFetches = (standIn: RegistryStandIn) => standIn.count("GET", "/registry/keys")

/** A worker (the deployment token, unless the options say otherwise) against the stand-in, registered. */
const setup = (standIn: RegistryStandIn, options: Partial<WorkerOptions> = { token: TOKEN }) =>
  Effect.gen(function* () {
    const log: Array<LogLine> = []
    const worker = yield* makeWorker({ pinboard: standIn.url, worker: "w1", instances: { "/counters": counter }, log: (line) => void log.push(line), ...options })
    yield* worker.registered
    /** The status of a request attested by `signing`. */
    const send = (signing: TestAttestationKey) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const token = yield* Effect.promise(() => signTestAttestation(signing, PLACEMENT, now))
        const headers = { "pinboard-attestation": token }
        return yield* Effect.promise(() => fetch(`${worker.url}/counters/c1/increment`, { method: "POST", headers }).then((r) => r.status))
      })
    return { worker, send, log }
  })

describe("attestations with Pinboard's keys", () => {
  it.effect("fetches the keys before it registers; an EdDSA token whose kid is in the set is accepted, others are 401", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      const [key, other] = yield* Effect.promise(() => Promise.all([ed25519Key(), ed25519Key()]))
      standIn.state.keys = [key.publicJwk]
      const { send } = yield* setup(standIn)
      expect(standIn.seen.map((r) => `${r.method} ${r.path}`)).toEqual(["GET /registry/keys", "POST /registry/workers"])
      expect(yield* send({ alg: "EdDSA", key })).toBe(200)
      // Another key under the set's kid; another key under its own kid (unknown, and the set was fetched just now).
      expect(yield* send({ alg: "EdDSA", key: other, kid: key.kid })).toBe(401)
      expect(yield* send({ alg: "EdDSA", key: other })).toBe(401)
    })
  )

  it.effect("with keys, an HS256 token signed with the token-derived key is refused; without keys it is accepted", () =>
    Effect.gen(function* () {
      const withKeys = yield* registryStandIn(LEASE_MS)
      withKeys.state.keys = [(yield* Effect.promise(ed25519Key)).publicJwk]
      expect(yield* (yield* setup(withKeys)).send(HS256)).toBe(401)
      const withoutKeys = yield* registryStandIn(LEASE_MS)
      expect(yield* (yield* setup(withoutKeys)).send(HS256)).toBe(200)
    })
  )

  it.effect("an unknown kid fetches the set once; accepted when the set has it now; no second fetch within 30 s", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      const [old, added, later] = yield* Effect.promise(() => Promise.all([ed25519Key(), ed25519Key(), ed25519Key()]))
      standIn.state.keys = [old.publicJwk]
      const { send } = yield* setup(standIn)
      // Past the cooldown since the start's fetch: Pinboard has added a key meanwhile.
      yield* TestClock.adjust(UNKNOWN_KID_COOLDOWN_MS)
      standIn.state.keys = [old.publicJwk, added.publicJwk]
      expect(keysFetches(standIn)).toBe(1)
      expect(yield* send({ alg: "EdDSA", key: added })).toBe(200)
      expect(keysFetches(standIn)).toBe(2)
      expect(yield* send({ alg: "EdDSA", key: added })).toBe(200)
      expect(keysFetches(standIn)).toBe(2)
      // Another unknown kid within 30 s of that fetch: refused without a fetch, even once Pinboard has it.
      standIn.state.keys = [old.publicJwk, added.publicJwk, later.publicJwk]
      yield* TestClock.adjust(UNKNOWN_KID_COOLDOWN_MS - 1000)
      expect(yield* send({ alg: "EdDSA", key: later })).toBe(401)
      expect(keysFetches(standIn)).toBe(2)
      yield* TestClock.adjust(1000)
      expect(yield* send({ alg: "EdDSA", key: later })).toBe(200)
      expect(keysFetches(standIn)).toBe(3)
    })
  )

  it.effect("the set is read again every 5 minutes: a set that became non-empty turns HS256 off", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      const { send } = yield* setup(standIn)
      expect(yield* send(HS256)).toBe(200)
      const key = yield* Effect.promise(ed25519Key)
      standIn.state.keys = [key.publicJwk]
      yield* TestClock.adjust(KEYS_REFRESH_MS - 1)
      yield* flush
      expect(keysFetches(standIn)).toBe(1)
      yield* TestClock.adjust(1)
      yield* until(() => keysFetches(standIn) === 2, "the periodic fetch")
      yield* until(send(HS256).pipe(Effect.map((status) => status === 401)), "HS256 refused after the refresh")
      expect(yield* send({ alg: "EdDSA", key })).toBe(200)
    })
  )

  it.effect("until Pinboard gave its keys the worker does not register, and refuses requests in band (503)", () =>
    Effect.gen(function* () {
      const calls: Array<string> = []
      const log: Array<LogLine> = []
      const unreachable: RegistryClient = {
        keys: async () => {
          calls.push("keys")
          throw new Error("connect ECONNREFUSED")
        },
        register: async () => {
          calls.push("register")
          throw new Error("not reached")
        },
        heartbeat: async () => ({ _tag: "LeaseLost" }),
        release: async () => true,
        deregister: async () => {}
      }
      const worker = yield* makeWorker({
        pinboard: "http://127.0.0.1:1",
        token: TOKEN,
        worker: "w1",
        instances: { "/counters": counter },
        registry: unreachable,
        log: (line) => void log.push(line)
      })
      yield* until(() => log.some((line) => line.message === "register failed, retrying"), "the first attempt")
      expect(log.find((line) => line.message === "register failed, retrying")!.cause).toBe("register: connect ECONNREFUSED")
      const now = yield* Clock.currentTimeMillis
      const token = yield* Effect.promise(() => signTestAttestation(HS256, PLACEMENT, now))
      const response = yield* Effect.promise(() => fetch(`${worker.url}/counters/c1/increment`, { method: "POST", headers: { "pinboard-attestation": token } }))
      expect([response.status, response.headers.get("pinned-refusal"), yield* Effect.promise(() => response.text())]).toEqual([
        503,
        "lease-unhealthy",
        '{"error":"attestation keys not known yet"}'
      ])
      expect(calls).toEqual(["keys"])
    })
  )

  it.effect("a worker with a credential alone verifies EdDSA attestations", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      const key = yield* Effect.promise(ed25519Key)
      standIn.state.keys = [key.publicJwk]
      const { send } = yield* setup(standIn, { credential: "worker-key" })
      expect(yield* send({ alg: "EdDSA", key })).toBe(200)
      expect(yield* send(HS256)).toBe(401)
    })
  )

  it.effect("a worker with a credential alone and an empty key set fails at start: nothing could verify attestations", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      const exit = yield* Effect.exit(makeWorker({ pinboard: standIn.url, worker: "w1", instances: { "/counters": counter }, credential: "worker-key", log: () => {} }))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain(
        "Pinboard publishes no attestation keys (GET /registry/keys), so a worker holding a credential and no deployment token could verify no Pinboard-Attestation"
      )
      expect(standIn.seen.map((r) => `${r.method} ${r.path}`)).toEqual(["GET /registry/keys"])
    })
  )
})
