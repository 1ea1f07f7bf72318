// /readyz (docs/proxy.md): ready only when not shutting down, the registry answers, and the
// registry's clock is within 1 s of ours.
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { RegistryUnavailable } from "../../src/Errors.js"
import { readyz } from "../../src/http/Probes.js"
import type { RegistryBackend } from "../../src/registry/Backend.js"
import { makeMemoryBackend } from "../../src/registry/Memory.js"
import { makeRegistry, Registry } from "../../src/registry/Registry.js"

const policy = { leaseMs: 15_000, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: 15_000 }
const T = 1_800_000_000_000
const withRegistryTime = (time: RegistryBackend["time"]) =>
  Effect.provideService(Registry, makeRegistry({ ...makeMemoryBackend(1, policy), time }, policy))

describe("/readyz", () => {
  it.effect("is ready when the registry's clock is within 1 s", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      expect(yield* readyz(() => false).pipe(withRegistryTime(Effect.succeed(T - 1000)))).toEqual({ status: "ready" })
      expect(yield* readyz(() => false).pipe(withRegistryTime(Effect.succeed(T + 1000)))).toEqual({ status: "ready" })
    }))

  it.effect("is not ready when the clocks differ by more than 1 s", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const error = yield* Effect.flip(readyz(() => false).pipe(withRegistryTime(Effect.succeed(T - 1001))))
      expect(error).toMatchObject({ _tag: "NotReady", reason: "clock skew with the registry" })
      expect(error.reply).toEqual({ status: 503, contentType: "application/json", body: '{"error":"not ready"}' })
    }))

  it.effect("is not ready when the registry is unavailable or shutdown has begun", () =>
    Effect.gen(function* () {
      const down = yield* Effect.flip(readyz(() => false).pipe(withRegistryTime(new RegistryUnavailable({}))))
      expect(down.reason).toBe("registry unavailable")
      const stopping = yield* Effect.flip(readyz(() => true).pipe(withRegistryTime(Effect.succeed(0))))
      expect(stopping.reason).toBe("shutting down")
    }))

  it.effect("is not ready when the registry takes more than 1 s", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.fork(Effect.flip(readyz(() => false).pipe(withRegistryTime(Effect.never))))
      yield* TestClock.adjust(1000)
      expect((yield* fiber.await).pipe((exit) => exit._tag === "Success" && exit.value.reason)).toBe("registry slow")
    }))
})
