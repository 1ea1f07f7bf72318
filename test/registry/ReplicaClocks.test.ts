// One registry, two Pinboard replicas whose wall clocks differ (docs/protocol.md "Time"), on
// TestClock: replica A's wall clock is right, replica B's steps about at random (within the
// bound, two leases either way, an hour either way). Workers register and beat through either,
// ids resolve through either, either sweeps, and the registry is wiped now and then. On the
// embedded layer and on a real redis-server (whose scripts get `now` from the replicas' clocks).
// At every step:
//   - a replica out of bound gets `ClockOffsetTooLarge` and writes nothing; one in bound never;
//   - epochs only grow per id, across wipes too, whichever replica minted them;
//   - nothing is placed until one lease (by the registry's time) after the first use of a
//     bucket since its wipe, whichever replica used it first;
//   - a worker that beat in time is never told 410, whatever a skewed replica swept.
import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Effect, Exit, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { bucketOf } from "../../src/contract/Bucket.js"
import { Metrics } from "../../src/observe/Metrics.js"
import type { RegistryBackend } from "../../src/registry/RegistryBackend.js"
import type { RegistryPolicy } from "../../src/registry/Domain.js"
import type { RegistryService } from "../../src/registry/Registry.js"
import { makeRegistry } from "../../src/registry/RegistryOnBackend.js"
import { makeSampledClock } from "../../src/registry/RegistryClock.js"
import { backendSubjects, useRedis, type BackendSubject } from "../support/RedisBackend.js"
import { skewedClock } from "../support/SkewedClock.js"
import { scaled } from "../support/Time.js"
import * as Gen from "../support/Arbitraries.js"

const LEASE_MS = 3000
const MAX_OFFSET_MS = 1000
const BUCKETS = 2
const T0 = 1_800_000_000_000
const policy: RegistryPolicy = { leaseMs: LEASE_MS, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: LEASE_MS }
const WORKERS = ["w1", "w2", "w3"] as const
const IDS = ["a", "b", "c", "d", "e"]
const threads = [{ namespace: "/n", hostname: "", env: "" }]
const SKEWS_IN_BOUND = [0, 400, -900, MAX_OFFSET_MS]
const SKEWS_OUT_OF_BOUND = [1500, -1500, 2 * LEASE_MS, -2 * LEASE_MS, 3_600_000, -3_600_000]
const DEEP = process.env.PINBOARD_DEEP === "1"
const RUNS = DEEP ? 500 : 25

type Via = "A" | "B"
type Step =
  | { readonly op: "advance"; readonly ms: number }
  | { readonly op: "skew"; readonly ms: number }
  | { readonly op: "beat" | "sweep"; readonly via: Via }
  | { readonly op: "resolve"; readonly via: Via; readonly id: string }
  | { readonly op: "wipe" }

const via = Gen.constantFrom<Via>("A", "B")
const step: Gen.Arbitrary<Step> = Gen.oneof(
  { weight: 8, arbitrary: Gen.record({ op: Gen.constant("advance" as const), ms: Gen.integer({ min: 50, max: LEASE_MS / 2 }) }) },
  { weight: 2, arbitrary: Gen.record({ op: Gen.constant("skew" as const), ms: Gen.constantFrom(...SKEWS_IN_BOUND) }) },
  { weight: 2, arbitrary: Gen.record({ op: Gen.constant("skew" as const), ms: Gen.constantFrom(...SKEWS_OUT_OF_BOUND) }) },
  { weight: 8, arbitrary: Gen.record({ op: Gen.constant("beat" as const), via }) },
  { weight: 3, arbitrary: Gen.record({ op: Gen.constant("sweep" as const), via }) },
  { weight: 16, arbitrary: Gen.record({ op: Gen.constant("resolve" as const), via, id: Gen.constantFrom(...IDS) }) },
  { weight: 1, arbitrary: Gen.record({ op: Gen.constant("wipe" as const) }) }
)

/**
 * Every run ends as the issue's second finding began: a wipe, the first requests through a
 * replica an hour behind, then the healthy one placing every id again.
 */
const wipeThenSlowReplicaFirst: ReadonlyArray<Step> = [
  { op: "wipe" },
  { op: "skew", ms: -3_600_000 },
  ...IDS.map((id): Step => ({ op: "resolve", via: "B", id })),
  ...Array.from({ length: 4 }, (): ReadonlyArray<Step> => [
    { op: "beat", via: "A" },
    ...IDS.map((id): Step => ({ op: "resolve", via: "A", id })),
    { op: "advance", ms: LEASE_MS / 3 }
  ]).flat()
]

/** Wipes every bucket of the subject's backend. */
const wipeAll = (subject: BackendSubject) => Effect.forEach(Array.from({ length: BUCKETS }, (_, b) => b), subject.wipe, { discard: true })

const redis = useRedis()
const subjects = backendSubjects(redis, "clocks", BUCKETS, policy)

const seen = new Map<string, number>()
const note = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1)

/** The typed error a cause fails with, if it fails with one. */
const errorOf = <E>(cause: Cause.Cause<E>): E | undefined => Option.getOrUndefined(Cause.findErrorOption(cause))

const runSteps = (subject: BackendSubject, steps: ReadonlyArray<Step>) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(T0)
    const base = yield* Clock.Clock
    // The registry's own time is the test's: the replicas sample it as they would Redis TIME.
    const backend: RegistryBackend = { ...subject.backend, time: Effect.sync(() => base.currentTimeMillisUnsafe()) }
    const skew = { A: 0, B: 0 }
    const replicaOn = (name: Via) =>
      makeSampledClock(backend, MAX_OFFSET_MS).pipe(
        Effect.provide(Layer.succeed(Metrics, { clockOffset: () => undefined, clockOutOfBound: () => undefined } as never)),
        Effect.provideService(Clock.Clock, skewedClock(base, () => skew[name])),
        Effect.map((clock) => makeRegistry(backend, policy, () => "wind_down", clock))
      )
    const replicas: Record<Via, RegistryService> = { A: yield* replicaOn("A"), B: yield* replicaOn("B") }
    const inBound = (name: Via) => Math.abs(skew[name]) <= MAX_OFFSET_MS
    const now = () => base.currentTimeMillisUnsafe()

    const incarnations = new Map<string, string>()
    const renewedAt = new Map<string, number>()
    const epochs = new Map<string, bigint>()
    let wipedAt = -Infinity
    /** Per bucket: the registry time of its first use since the last wipe. */
    const firstUse = new Map<number, number>()
    const used = () => {
      for (let b = 0; b < BUCKETS; b++) if (!firstUse.has(b)) firstUse.set(b, now())
    }
    const usedBucket = (b: number) => {
      if (!firstUse.has(b)) firstUse.set(b, now())
    }

    /** Runs `op` through a replica; checks the clock rule; answers its exit when it got past the clock. */
    const through = <A, E extends { readonly _tag: string }>(name: Via, op: Effect.Effect<A, E>) =>
      Effect.gen(function* () {
        const exit = yield* Effect.exit(op)
        const clockRefused = Exit.isFailure(exit) && errorOf(exit.cause)?._tag === "ClockOffsetTooLarge"
        expect(clockRefused, `${name} skewed ${skew[name]} ms`).toBe(!inBound(name))
        if (clockRefused) note("refused: clock offset")
        return clockRefused ? undefined : exit
      })

    const register = (name: Via, worker: string) =>
      Effect.gen(function* () {
        const exit = yield* through(name, replicas[name].register({ worker, advertiseUrl: `http://127.0.0.1:1/${worker}`, namespaces: threads, headroom: 1, draining: false, callerKey: undefined }))
        if (exit === undefined) return
        used()
        if (Exit.isSuccess(exit)) {
          incarnations.set(worker, exit.value.incarnation)
          renewedAt.set(worker, now())
        }
      })

    for (const worker of WORKERS) yield* register("A", worker)
    for (const s of steps) {
      switch (s.op) {
        case "advance":
          yield* TestClock.adjust(s.ms)
          break
        case "skew":
          skew.B = s.ms
          break
        case "wipe":
          yield* wipeAll(subject)
          wipedAt = now()
          firstUse.clear()
          note("wiped")
          break
        case "sweep": {
          const exit = yield* through(s.via, replicas[s.via].sweep)
          if (exit !== undefined) used()
          break
        }
        case "beat":
          for (const worker of WORKERS) {
            const incarnation = incarnations.get(worker)
            if (incarnation === undefined) {
              yield* register(s.via, worker)
              continue
            }
            const exit = yield* through(s.via, replicas[s.via].heartbeat(worker, { incarnation, headroom: 1, draining: false, degraded: false }))
            if (exit === undefined) continue
            used()
            if (Exit.isSuccess(exit)) {
              renewedAt.set(worker, now())
              note("renewed")
            } else if (errorOf(exit.cause)?._tag === "LeaseLost") {
              const renewed = renewedAt.get(worker) ?? -Infinity
              expect(now() >= renewed + LEASE_MS || wipedAt >= renewed, `${worker} told 410 ${now() - renewed} ms after its renewal`).toBe(true)
              note("410 after a lapse or a wipe")
              incarnations.delete(worker)
              yield* register(s.via, worker)
            }
          }
          break
        case "resolve": {
          const bucket = bucketOf("", "/n", s.id, BUCKETS)
          const exit = yield* through(s.via, replicas[s.via].resolve({ env: "", namespace: "/n", id: s.id, hostname: "", caller: undefined, affinity: "x", excluded: [] }))
          if (exit === undefined) break
          usedBucket(bucket)
          if (Exit.isFailure(exit)) {
            const error = errorOf(exit.cause)
            if (error !== undefined) note(error._tag)
            break
          }
          const epoch = BigInt(exit.value.epoch)
          const before = epochs.get(s.id)
          if (exit.value.isNew) {
            expect(now() - firstUse.get(bucket)!, `placed ${s.id} inside the cold start`).toBeGreaterThanOrEqual(LEASE_MS)
            if (before !== undefined) expect(epoch > before, `${s.id}: epoch ${epoch} after ${before}`).toBe(true)
            if (before !== undefined && wipedAt > -Infinity) note("placed again after a wipe")
            if (before !== undefined && wipedAt > -Infinity && s.via === "A" && skew.B === -3_600_000) note("placed again after a wipe the slow replica saw first")
            epochs.set(s.id, epoch)
            note(`placed via ${s.via}`)
            if (s.via === "B" && skew.B !== 0) note("placed via B skewed in bound")
          } else {
            expect(epoch, `${s.id} forwarded at another epoch`).toBe(before)
            note("forwarded")
          }
          break
        }
      }
    }
  })

describe.each(subjects)("two replicas, their wall clocks apart, one registry (%s)", (name, make) => {
  it.effect(
    "no write out of bound, epochs only grow, no placement in a cold start, no 410 for a worker on time",
    () =>
      Effect.gen(function* () {
        seen.clear()
        // No new run starts after the time limit (fast-check's interruptAfterTimeLimit): the runs so far count.
        const deadline = performance.now() + scaled(60_000)
        let runs = 0
        yield* Gen.assertEffect(
          Gen.array(step, { minLength: 40, maxLength: 160 }),
          (steps) =>
            Effect.suspend(() => {
              if (performance.now() > deadline) return Effect.void
              runs++
              return Effect.scoped(runSteps(make(), [...steps, ...wipeThenSlowReplicaFirst]))
            }),
          { runs: RUNS }
        )
        console.log(`replica clocks (${name}): ${runs} runs; ${[...seen].sort((a, b) => b[1] - a[1]).map(([what, n]) => `${what} ${n}`).join(", ")}`)
        for (const what of ["refused: clock offset", "placed via A", "placed via B", "placed again after a wipe", "placed again after a wipe the slow replica saw first", "RegistryColdStart", "forwarded", "renewed"]) {
          expect(seen.get(what) ?? 0, what).toBeGreaterThan(0)
        }
      }),
    scaled(120_000)
  )
})
