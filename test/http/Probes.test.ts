// /readyz (docs/proxy.md): ready only when not shutting down, the registry answers within 1 s,
// and this process can tell the registry's time within `registry.maxClockOffsetMs`; the
// body's `reason` says why not.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { RegistryUnavailable } from "../../src/Errors.js"
import { readyz } from "../../src/http/Probes.js"
import type { RegistryBackend } from "../../src/registry/RegistryBackend.js"
import type { ClockReading } from "../../src/registry/ClockReading.js"
import { makeMemoryBackend } from "../../src/registry/Memory.js"
import { localRegistryClock } from "../../src/registry/RegistryClock.js"
import { Registry } from "../../src/registry/Registry.js"
import { makeRegistry } from "../../src/registry/RegistryOnBackend.js"

const policy = { leaseMs: 15_000, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: 15_000 }
const withRegistry = (time: RegistryBackend["time"], reading: ClockReading = { _tag: "InBound", nowMs: 0, offsetMs: 0 }) =>
  Effect.provideService(Registry, makeRegistry({ ...makeMemoryBackend(1, policy), time }, policy, () => "wind_down", { ...localRegistryClock, reading: Effect.succeed(reading) }))

describe("/readyz", () => {
  it.effect("is ready while the registry answers and its clock is in bound", () =>
    Effect.gen(function* () {
      expect(yield* readyz(() => false).pipe(withRegistry(Effect.succeed(0), { _tag: "InBound", nowMs: 0, offsetMs: -1000 }))).toEqual({ status: "ready" })
    }))

  it.effect("is not ready while the clock offset from the registry is past the bound, and says so", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(readyz(() => false).pipe(withRegistry(Effect.succeed(0), { _tag: "OutOfBound", offsetMs: 20_000 })))
      expect(error.reply).toEqual({
        status: 503,
        contentType: "application/json",
        body: '{"error":"not ready","reason":"clock offset from the registry 20000 ms, past registry.maxClockOffsetMs"}'
      })
      const unsampled = yield* Effect.flip(readyz(() => false).pipe(withRegistry(Effect.succeed(0), { _tag: "Unsampled" })))
      expect(unsampled.reason).toBe("registry time not sampled")
    }))

  it.effect("is not ready when the registry is unavailable or shutdown has begun", () =>
    Effect.gen(function* () {
      const down = yield* Effect.flip(readyz(() => false).pipe(withRegistry(new RegistryUnavailable({}))))
      expect(down.reason).toBe("registry unavailable")
      const stopping = yield* Effect.flip(readyz(() => true).pipe(withRegistry(Effect.succeed(0))))
      expect(stopping.reason).toBe("shutting down")
    }))

  it.effect("is not ready when the registry takes more than 1 s", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.forkChild(Effect.flip(readyz(() => false).pipe(withRegistry(Effect.never))))
      yield* TestClock.adjust(1000)
      expect((yield* Fiber.await(fiber)).pipe((exit) => exit._tag === "Success" && exit.value.reason)).toBe("registry slow")
    }))
})
