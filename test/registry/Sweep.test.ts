// The sweep (docs/registry-api.md "Ended rows and the sweep") runs every half lease for as long
// as the registry lives: a run that fails, or dies on a defect such as an unexpected reply from
// Redis, is logged and the next run goes ahead.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, References } from "effect"
import { TestClock } from "effect/testing"
import { AppConfig } from "../../src/AppConfig.js"
import { Metrics, metricsOff } from "../../src/observe/Metrics.js"
import { Backend } from "../../src/registry/Backend.js"
import { makeMemoryBackend } from "../../src/registry/Memory.js"
import { Registry } from "../../src/registry/Registry.js"
import { localRegistryClock, RegistryClock } from "../../src/registry/RegistryClock.js"
import { configForTests } from "../support/TestConfig.js"

const LEASE = 1_000

describe("the registry's sweep", () => {
  it.effect("goes on after a run that died on a defect", () =>
    Effect.gen(function* () {
      const config = configForTests({ leaseMs: LEASE })
      const memory = makeMemoryBackend(config.buckets, { leaseMs: LEASE, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: LEASE })
      let runs = 0
      const backend = {
        ...memory,
        sweep: (now: number) =>
          Effect.suspend(() => {
            runs++
            if (runs === 1) return Effect.die(new Error("sweep.lua answered an unexpected reply: ?"))
            return memory.sweep(now)
          })
      }
      const registry = Registry.layer.pipe(
        Layer.provide(Layer.mergeAll(Backend.layerTest(backend), RegistryClock.layerTest(localRegistryClock), Metrics.layerTest(metricsOff))),
        Layer.provide(AppConfig.layer(config))
      )
      yield* Layer.build(registry).pipe(Effect.provideService(References.MinimumLogLevel, "None"))
      yield* TestClock.adjust(LEASE * 2)
      expect(runs).toBeGreaterThanOrEqual(4)
    })
  )
})
