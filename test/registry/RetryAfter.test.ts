// Retry-After on a refused resolve is the time left (docs/errors.md), and never more than one
// lease: a cold-start marker or a deadline may have been stamped by a call whose `now` was read a
// moment after the query's (another request, another Pinboard), so the backend can answer a time
// left above the lease; none of them outlasts one lease from the registry's present.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, References } from "effect"
import { AppConfig } from "../../src/AppConfig.js"
import { Metrics, metricsOff } from "../../src/observe/Metrics.js"
import { Backend } from "../../src/registry/Backend.js"
import type { ResolveOutcome } from "../../src/registry/Domain.js"
import { makeMemoryBackend } from "../../src/registry/Memory.js"
import { Registry } from "../../src/registry/Registry.js"
import { localRegistryClock, RegistryClock } from "../../src/registry/RegistryClock.js"
import { configForTests } from "../support/TestConfig.js"

const LEASE = 2_000

const refusalFor = (outcome: ResolveOutcome) =>
  Effect.gen(function* () {
    const config = configForTests({ leaseMs: LEASE })
    const memory = makeMemoryBackend(config.buckets, { leaseMs: LEASE, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: LEASE })
    const backend = { ...memory, resolve: () => Effect.succeed(outcome) }
    const registry = Registry.layer.pipe(
      Layer.provide(Layer.mergeAll(Backend.layerTest(backend), RegistryClock.layerTest(localRegistryClock), Metrics.layerTest(metricsOff))),
      Layer.provide(AppConfig.layer(config))
    )
    const context = yield* Layer.build(registry).pipe(Effect.provideService(References.MinimumLogLevel, "None"))
    const request = { env: "prod", namespace: "threads", id: "t1", hostname: "", caller: undefined, affinity: "", excluded: [] }
    return yield* Effect.flip(Effect.flatMap(Registry, (r) => r.resolve(request)).pipe(Effect.provide(context)))
  })

describe("a refused resolve's time left", () => {
  for (const [outcome, tag] of [
    ["ColdStart", "RegistryColdStart"],
    ["TakeoverInProgress", "TakeoverInProgress"],
    ["Displaced", "HostnameBindingDisplaced"]
  ] as const) {
    it.effect(`${outcome}: at most one lease, else as the backend answered`, () =>
      Effect.gen(function* () {
        const late = yield* refusalFor({ _tag: outcome, retryAfterMs: LEASE + 5 })
        expect(late).toMatchObject({ _tag: tag, retryAfterMs: LEASE })
        const within = yield* refusalFor({ _tag: outcome, retryAfterMs: LEASE - 700 })
        expect(within).toMatchObject({ _tag: tag, retryAfterMs: LEASE - 700 })
      })
    )
  }
})
