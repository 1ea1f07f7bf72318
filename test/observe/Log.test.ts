// The JSON logger (docs/operations.md "Logs"): an Effect log's `time` is the fiber's Clock,
// so TestClock sets it; lines below `log.level` are not written.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { vi } from "vitest"
import { logLayer } from "../../src/observe/Log.js"

const T = 1_800_000_000_000

/** Runs `effect` with the JSON logger at `level`, returning what it wrote to stdout. */
const linesOf = (level: "debug" | "info", effect: Effect.Effect<void>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const written: Array<string> = []
      const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
        written.push(String(chunk))
        return true
      })
      return { written, spy }
    }),
    ({ written }) => Effect.as(Effect.provide(effect, logLayer(level)), written),
    ({ spy }) => Effect.sync(() => spy.mockRestore())
  )

describe("logLayer", () => {
  it.effect("stamps each line with the Clock's time, then level, message and annotations", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const written = yield* linesOf(
        "info",
        Effect.gen(function* () {
          yield* Effect.logInfo("first").pipe(Effect.annotateLogs("id", "a"))
          yield* TestClock.adjust(1_500)
          yield* Effect.logWarning("second")
        })
      )
      expect(written).toEqual([
        '{"time":"2027-01-15T08:00:00.000Z","level":"info","message":"first","id":"a"}\n',
        '{"time":"2027-01-15T08:00:01.500Z","level":"warning","message":"second"}\n'
      ])
    }))

  it.effect("writes nothing below its level", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const written = yield* linesOf("info", Effect.logDebug("hidden"))
      expect(written).toEqual([])
      const debug = yield* linesOf("debug", Effect.logDebug("shown"))
      expect(debug).toEqual(['{"time":"2027-01-15T08:00:00.000Z","level":"debug","message":"shown"}\n'])
    }))
})
