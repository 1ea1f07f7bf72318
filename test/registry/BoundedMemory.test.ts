// docs/protocol.md: after 10,000 placements whose workers then lapse, the
// periodic sweep leaves only each bucket's fixed keys within two leases.
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { Backend } from "../../src/registry/Backend.js"
import type { RegistryBackend } from "../../src/registry/RegistryBackend.js"
import { localRegistryClock, RegistryClock } from "../../src/registry/RegistryClock.js"
import { AppConfig } from "../../src/AppConfig.js"
import { Metrics, metricsOff } from "../../src/observe/Metrics.js"
import * as Registry from "../../src/registry/Registry.js"
import { countKeys, useRedis } from "../support/RedisBackend.js"
import { configForTests, redisSection } from "../support/TestConfig.js"
import { poll, scaled } from "../support/Time.js"

const LEASE = 15_000
const BUCKETS = 16
const PLACEMENTS = 10_000
/**
 * What a bucket keeps whatever its history: cold-start marker, epoch counter, namespaces, and the
 * membership views' change-log counter and trim mark.
 */
const FIXED_KEYS_PER_BUCKET = 5

const redis = useRedis()

/** The test's keys, less those matching `except`. */
const keysBut = async (except: RegExp): Promise<number> => (await redis.client.keys("\\{bounded:*")).filter((key) => !except.test(key)).length
/** The sweeps the clock steps woke run against the real Redis: poll it until they are done. */
const untilKeysAtMost = (bound: number, except = /^$/) =>
  Effect.promise(() => poll(async () => (await keysBut(except)) <= bound, { timeoutMs: 5000, reason: `at most ${bound} keys (but ${except})` }))

/** The registry's sweeps under way (the backend of Backend.layer, its sweep counted). */
const sweeps = { running: 0 }
const countingSweeps = Layer.effect(
  Backend,
  Effect.map(Backend, (backend): RegistryBackend => ({
    ...backend,
    sweep: (now) =>
      Effect.suspend(() => {
        sweeps.running++
        return Effect.ensuring(backend.sweep(now), Effect.sync(() => sweeps.running--))
      })
  }))
)

/**
 * Moves the clock half a lease (the sweep's period) at a time, each step waking the sweep, and
 * waits for that sweep to end before the next step: TestClock waits for the fiber it wakes to
 * suspend, not for its round trips to Redis, and the next sweep is due half a lease after one ends.
 */
const advance = (ms: number) =>
  Effect.gen(function* () {
    const sweepsEnded = Effect.promise(() => poll(() => sweeps.running === 0, { timeoutMs: 5000, reason: "the sweep under way to end" }))
    yield* sweepsEnded
    for (let step = 0; step < ms / (LEASE / 2); step++) {
      yield* TestClock.adjust(LEASE / 2)
      yield* sweepsEnded
    }
  })

describe("bounded memory on Redis", () => {
  it.effect(
    "removes the keys of ended placements and lapsed workers within two leases",
    () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(1_800_000_000_000)
        const config = configForTests({
          leaseMs: LEASE,
          buckets: BUCKETS,
          redis: redisSection({ url: `redis://127.0.0.1:${redis.server.port}`, prefix: "bounded" })
        })
        const layer = Registry.Registry.layer.pipe(
          Layer.provide(RegistryClock.layerTest(localRegistryClock)),
          Layer.provide(countingSweeps.pipe(Layer.provide(Backend.layer))),
          Layer.provide(Metrics.layerTest(metricsOff)),
          Layer.provide(AppConfig.layer(config))
        )
        const registry = Context.get(yield* Layer.build(layer), Registry.Registry)
        const workers = ["w1", "w2", "w3", "w4"]
        const incarnations = yield* Effect.forEach(workers, (worker) =>
          registry.register({ worker, advertiseUrl: `http://127.0.0.1:1/${worker}`, namespaces: [{ namespace: "/threads", hostname: "", env: "" }], headroom: 1, draining: false, callerKey: undefined })
        )
        const beatAll = Effect.forEach(incarnations, (answer) =>
          registry.heartbeat(answer.worker, { incarnation: answer.incarnation, headroom: 1, draining: false, degraded: false })
        )
        yield* TestClock.adjust(LEASE / 2)
        yield* beatAll
        yield* TestClock.adjust(LEASE / 2)
        yield* beatAll

        yield* Effect.forEach(
          Array.from({ length: PLACEMENTS }, (_, i) => `id-${i}`),
          (id) => registry.resolve({ env: "", namespace: "/threads", id, hostname: "", caller: undefined, affinity: id, excluded: [] }),
          { concurrency: 64, discard: true }
        )
        expect(yield* Effect.promise(() => countKeys(redis.client, "bounded"))).toBeGreaterThan(PLACEMENTS)

        // The workers stop heartbeating; the sweep runs every half lease.
        yield* advance(LEASE)
        yield* advance(LEASE)
        // Within two leases only the fixed keys and the change log's entries of the removed workers are left.
        yield* untilKeysAtMost(FIXED_KEYS_PER_BUCKET * BUCKETS, /:(chg|tomb)$/)
        expect(yield* Effect.promise(() => keysBut(/:(chg|tomb)$/))).toBeLessThanOrEqual(FIXED_KEYS_PER_BUCKET * BUCKETS)
        // The log keeps a removed worker's id one lease longer, for the membership views to learn of it.
        yield* advance(LEASE)
        yield* untilKeysAtMost(FIXED_KEYS_PER_BUCKET * BUCKETS)
        expect(yield* Effect.promise(() => countKeys(redis.client, "bounded"))).toBeLessThanOrEqual(FIXED_KEYS_PER_BUCKET * BUCKETS)
        expect(yield* registry.workers).toEqual([])
      }),
    scaled(60_000)
  )
})
