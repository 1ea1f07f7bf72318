// The coalescer of membership writes (src/registry/Coalescer.ts): writes arriving while a call
// is on its way leave together, one call per bucket with their entries in arrival order, and
// each write gets its own buckets' answers back.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { makeCoalescer, type BucketAnswer, type BucketCall } from "../../src/registry/Coalescer.js"
import { poll } from "../support/Time.js"

/** A send that records its calls and answers when the test says, each entry echoed back with its bucket. */
const controlledSend = () => {
  const sent: Array<ReadonlyArray<BucketCall>> = []
  const pending: Array<(answers: ReadonlyArray<BucketAnswer>) => void> = []
  const send = (calls: ReadonlyArray<BucketCall>) => {
    sent.push(calls)
    return new Promise<ReadonlyArray<BucketAnswer>>((resolve) => pending.push(resolve))
  }
  const answerAll = (failing: ReadonlyArray<number> = []) => {
    // The oldest call still waiting for its answer.
    const calls = sent[sent.length - pending.length]!
    pending.shift()!(calls.map((c) => (failing.includes(c.bucket) ? { bucket: c.bucket, ok: false as const, value: new Error(`bucket ${c.bucket} down`) } : { bucket: c.bucket, ok: true as const, value: c.args.map((a) => `${c.bucket}:${a}`) })))
  }
  return { sent, send, answerAll }
}

const tick = () => new Promise((resolve) => setImmediate(resolve))

describe("coalesced membership writes", () => {
  it("sends the first write at once, groups those that arrive meanwhile into the next call, and answers each write its own entries", async () => {
    const wire = controlledSend()
    const write = makeCoalescer(wire.send)
    const first = Effect.runPromise(write<string>([0, 1], ["a"]))
    await tick()
    expect(wire.sent).toEqual([[{ bucket: 0, args: ["a"] }, { bucket: 1, args: ["a"] }]])

    const second = Effect.runPromise(write<string>([0, 1], ["b"]))
    const third = Effect.runPromise(write<string>([1], ["c"]))
    await tick()
    expect(wire.sent).toHaveLength(1)

    wire.answerAll()
    expect(await first).toEqual({ reached: [[0, "0:a"], [1, "1:a"]], unreached: [] })
    await tick()
    // One call per bucket, entries in arrival order.
    expect(wire.sent[1]).toEqual([{ bucket: 0, args: ["b"] }, { bucket: 1, args: ["b", "c"] }])
    wire.answerAll()
    expect(await second).toEqual({ reached: [[0, "0:b"], [1, "1:b"]], unreached: [] })
    expect(await third).toEqual({ reached: [[1, "1:c"]], unreached: [] })
  })

  it("does not hold writes back for longer than 10 ms behind a call that is not answered (a dead shard)", async () => {
    const wire = controlledSend()
    const write = makeCoalescer(wire.send)
    void Effect.runPromise(write<string>([0, 1], ["a"]))
    await tick()
    const second = Effect.runPromise(write<string>([0], ["b"]))
    expect(wire.sent).toHaveLength(1)
    // The held write leaves on the coalescer's own 10 ms timer (real time): 50 ms is its bound with slack.
    await poll(() => wire.sent.length === 2, { timeoutMs: 50, everyMs: 1, reason: "the held write to leave without the first call's answer" })
    expect(wire.sent[1]).toEqual([{ bucket: 0, args: ["b"] }])
    wire.answerAll()
    wire.answerAll()
    expect(await second).toEqual({ reached: [[0, "0:b"]], unreached: [] })
  })

  it("reports a bucket that was not reached to every write that named it, with the cause", async () => {
    const wire = controlledSend()
    const write = makeCoalescer(wire.send)
    const one = Effect.runPromise(write<string>([0, 1, 2], ["x"]))
    const other = Effect.runPromise(write<string>([0], ["y"]))
    await tick()
    wire.answerAll([1])
    const out = await one
    expect(out.reached).toEqual([[0, "0:x"], [2, "2:x"]])
    expect(out.unreached).toEqual([1])
    expect(String(out.cause)).toContain("bucket 1 down")
    expect(await other).toEqual({ reached: [[0, "0:y"]], unreached: [] })
  })

  it("keeps a call to at most 128 writes; the rest leave in the next one", async () => {
    const wire = controlledSend()
    const write = makeCoalescer(wire.send)
    const writes = Array.from({ length: 200 }, (_, i) => Effect.runPromise(write<string>([0], [`w${i}`])))
    await tick()
    expect(wire.sent[0]![0]!.args).toHaveLength(128)
    wire.answerAll()
    await tick()
    expect(wire.sent[1]![0]!.args).toHaveLength(72)
    wire.answerAll()
    const answers = await Promise.all(writes)
    expect(answers.map((a) => a.reached[0]![1])).toEqual(Array.from({ length: 200 }, (_, i) => `0:w${i}`))
  })

  it("fails every write of a send that fails as a whole, and goes on with the next", async () => {
    let calls = 0
    const write = makeCoalescer(async (batch) => {
      calls++
      if (calls === 1) throw new Error("connection lost")
      return batch.map((c) => ({ bucket: c.bucket, ok: true as const, value: c.args }))
    })
    const failed = await Effect.runPromise(write<string>([0, 1], ["a"]))
    expect(failed.reached).toEqual([])
    expect(failed.unreached).toEqual([0, 1])
    expect(await Effect.runPromise(write<string>([0], ["b"]))).toEqual({ reached: [[0, "b"]], unreached: [] })
  })
})
