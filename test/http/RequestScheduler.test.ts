// The request fibers' scheduler: one queue drained in a microtask, tasks in priority order,
// and I/O never starved: a chain of tasks that keeps scheduling more still lets an
// immediate (the turn where sockets are read) run, within MAX_DRAINS_IN_A_ROW drains.
import { describe, expect, it } from "vitest"
import { Context, Effect, Scheduler } from "effect"
import { makeRequestScheduler } from "../../src/http/RequestScheduler.js"

describe("the request scheduler", () => {
  it("runs every task scheduled in one turn in one drain, after the current code, before an immediate", async () => {
    const scheduler = makeRequestScheduler()
    const order: Array<string> = []
    setImmediate(() => order.push("immediate"))
    scheduler.scheduleTask(() => order.push("a"), 0)
    scheduler.scheduleTask(() => order.push("b"), 0)
    order.push("sync")
    await new Promise((resolve) => setImmediate(resolve))
    expect(order).toEqual(["sync", "a", "b", "immediate"])
  })

  it("runs higher priorities first within a drain", async () => {
    const scheduler = makeRequestScheduler()
    const order: Array<number> = []
    scheduler.scheduleTask(() => order.push(1), 1)
    scheduler.scheduleTask(() => order.push(0), 0)
    await new Promise((resolve) => setImmediate(resolve))
    expect(order).toEqual([0, 1])
  })

  it("does not starve I/O: a long chain of tasks lets an immediate run within 2048 drains", async () => {
    const scheduler = makeRequestScheduler()
    const CHAIN = 100_000
    let drains = 0
    let immediateAt: number | undefined
    const chainEnded = new Promise<void>((resolve) => {
      const again = () => {
        if (++drains < CHAIN) scheduler.scheduleTask(again, 0)
        else resolve()
      }
      scheduler.scheduleTask(again, 0)
    })
    setImmediate(() => (immediateAt = drains))
    await chainEnded
    expect(immediateAt).toBeDefined()
    expect(immediateAt!).toBeLessThanOrEqual(2048)
  })

  it("runs Effect fibers to the same results as the default scheduler", async () => {
    const context = Context.make(Scheduler.Scheduler, makeRequestScheduler())
    const program = Effect.forEach([1, 2, 3], (n) => Effect.as(Effect.yieldNow, n * 2), { concurrency: "unbounded" })
    expect(await Effect.runPromiseWith(context)(program)).toEqual([2, 4, 6])
  })
})
