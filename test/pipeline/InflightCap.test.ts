// Step 8, the inflight cap (docs/proxy.md "Limits"): per worker, at most `forwards.maxInflight` forwards
// awaiting headers in this process; one more is 503 worker at capacity, retry.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Result, Layer } from "effect"
import { AppConfig } from "../../src/AppConfig.js"
import { InflightCap, makeInflightCap } from "../../src/pipeline/InflightCap.js"
import { configForTests } from "../support/TestConfig.js"

const takes = (cap: ReturnType<typeof makeInflightCap>, worker: string) =>
  Effect.map(Effect.result(cap.take(worker)), (result) => (Result.isFailure(result) ? result.failure._tag : "taken"))

describe("the inflight cap", () => {
  it.effect("takes up to maxInflight slots per worker, then refuses; other workers have their own", () =>
    Effect.gen(function* () {
      const cap = makeInflightCap(2)
      expect(yield* takes(cap, "w1")).toBe("taken")
      expect(yield* takes(cap, "w1")).toBe("taken")
      expect(yield* takes(cap, "w1")).toBe("WorkerAtCapacity")
      expect(yield* takes(cap, "w2")).toBe("taken")
      expect(new Map(cap.snapshot())).toEqual(new Map([["w1", 2], ["w2", 1]]))
    })
  )

  it.effect("a refusal takes no slot; a release gives one back", () =>
    Effect.gen(function* () {
      const cap = makeInflightCap(1)
      expect(yield* takes(cap, "w1")).toBe("taken")
      expect(yield* takes(cap, "w1")).toBe("WorkerAtCapacity")
      expect(new Map(cap.snapshot())).toEqual(new Map([["w1", 1]]))
      cap.release("w1")
      expect(yield* takes(cap, "w1")).toBe("taken")
    })
  )

  it.effect("a worker whose last slot is given back leaves the snapshot; releasing an unknown worker changes nothing", () =>
    Effect.gen(function* () {
      const cap = makeInflightCap(3)
      yield* cap.take("w1")
      yield* cap.take("w1")
      cap.release("w1")
      expect(new Map(cap.snapshot())).toEqual(new Map([["w1", 1]]))
      cap.release("w1")
      expect([...cap.snapshot()]).toEqual([])
      cap.release("w2")
      expect([...cap.snapshot()]).toEqual([])
      for (let i = 0; i < 3; i++) expect(yield* takes(cap, "w1")).toBe("taken")
      expect(yield* takes(cap, "w1")).toBe("WorkerAtCapacity")
    })
  )

  it.effect("the refusal is 503 worker at capacity, retry", () =>
    Effect.gen(function* () {
      const cap = makeInflightCap(0)
      const refused = yield* Effect.flip(cap.take("w1"))
      expect(refused.reply).toMatchObject({ status: 503, body: `{"error":"worker at capacity, retry"}` })
    })
  )

  it.effect("the layer takes the cap from forwards.maxInflight", () =>
    Effect.gen(function* () {
      const config = configForTests()
      const appConfig = Layer.succeed(AppConfig, { ...config, forwards: { ...config.forwards, maxInflight: 1 } })
      const cap = yield* Effect.provide(InflightCap, InflightCap.layer.pipe(Layer.provide(appConfig)))
      expect(yield* takes(cap, "w1")).toBe("taken")
      expect(yield* takes(cap, "w1")).toBe("WorkerAtCapacity")
    })
  )
})
