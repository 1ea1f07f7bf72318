// Coalesces the membership writes of many workers (register, heartbeat, deregister, nack) into
// one script call per bucket (fleet.lua): writes that arrive while a call is on its way wait
// for it (at most MAX_WAIT_MS: a shard that does not answer must not hold up the next writes)
// and then leave together, so under load a heartbeat costs a share of a call instead of a call
// per bucket. Each write still runs on its own, in arrival order, atomically per bucket.
import { Effect } from "effect"

/** One bucket's call: the entries of every write for it, in order. */
export interface BucketCall {
  readonly bucket: number
  readonly args: ReadonlyArray<string>
}

/** A bucket's answer: one reply per entry, or why the bucket was not reached. */
export type BucketAnswer = { readonly bucket: number; readonly ok: true; readonly value: ReadonlyArray<unknown> } | { readonly bucket: number; readonly ok: false; readonly value: unknown }

/** Writes per flush: bounds one script call's work. */
const MAX_WRITES = 128
/** The longest a write waits for the call before it to be answered. */
const MAX_WAIT_MS = 10

/** A write's outcome: each reached bucket's reply to its entry, the buckets not reached and why the first was not. */
export interface Coalesced<A> {
  readonly reached: ReadonlyArray<readonly [number, A]>
  readonly unreached: ReadonlyArray<number>
  readonly cause?: unknown
}

interface Write {
  readonly buckets: ReadonlyArray<number>
  readonly args: ReadonlyArray<string>
  readonly resume: (out: Effect.Effect<Coalesced<unknown>>) => void
}

export const makeCoalescer = (
  send: (calls: ReadonlyArray<BucketCall>) => Promise<ReadonlyArray<BucketAnswer>>
): (<A>(buckets: ReadonlyArray<number>, args: ReadonlyArray<string>) => Effect.Effect<Coalesced<A>>) => {
  let queue: Array<Write> = []
  let inFlight = 0
  /** The flush waiting for the calls in flight, or their MAX_WAIT_MS. */
  let waiting: ReturnType<typeof setTimeout> | undefined

  const flush = (): void => {
    clearTimeout(waiting)
    waiting = undefined
    if (queue.length === 0) return
    const batch = queue.slice(0, MAX_WRITES)
    queue = queue.slice(MAX_WRITES)
    if (queue.length > 0) waiting = setTimeout(flush, MAX_WAIT_MS)
    inFlight++
    const perBucket = new Map<number, Array<Write>>()
    for (const write of batch) {
      for (const bucket of write.buckets) {
        const writes = perBucket.get(bucket)
        if (writes === undefined) perBucket.set(bucket, [write])
        else writes.push(write)
      }
    }
    const calls = [...perBucket].map(([bucket, writes]) => ({ bucket, args: writes.flatMap((w) => w.args) }))
    // A send that fails as a whole (it should not) fails every bucket of the batch, never the coalescer.
    const sent = send(calls).catch((cause: unknown): ReadonlyArray<BucketAnswer> => calls.map((c) => ({ bucket: c.bucket, ok: false, value: cause })))
    void sent.then((answers) => {
      const outs = new Map<Write, { reached: Array<readonly [number, unknown]>; unreached: Array<number>; cause?: unknown }>(
        batch.map((write) => [write, { reached: [], unreached: [] }])
      )
      for (const answer of answers) {
        perBucket.get(answer.bucket)!.forEach((write, i) => {
          const out = outs.get(write)!
          if (answer.ok) out.reached.push([answer.bucket, answer.value[i]])
          else {
            out.unreached.push(answer.bucket)
            out.cause ??= answer.value
          }
        })
      }
      inFlight--
      if (queue.length > 0 && (inFlight === 0 || queue.length >= MAX_WRITES)) flush()
      for (const [write, out] of outs) write.resume(Effect.succeed(out))
    })
  }

  return <A>(buckets: ReadonlyArray<number>, args: ReadonlyArray<string>) =>
    Effect.callback<Coalesced<A>>((resume) => {
      queue.push({ buckets, args, resume: resume as Write["resume"] })
      if (queue.length > 1) return
      if (inFlight === 0) process.nextTick(flush)
      else waiting = setTimeout(flush, MAX_WAIT_MS)
    })
}
