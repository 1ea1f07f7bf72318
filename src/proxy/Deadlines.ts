// Timers for the forward's limits (docs/proxy.md "Limits"; proxy/Limits.ts) at the cost of a
// list append: the hot path cannot afford a fiber race per request (`Effect.timeout` costs
// 43 to 47 µs a request, a timer here 1 to 3 µs: `npm run bench:effect`, docs/proxy.md).
// Every duration has one list, in expiry order because every timer on it runs for the same
// time, and one fiber that sleeps on the Clock until the list's head is due. So a TestClock
// drives these timers like any other sleep.
import { Clock, Context, Effect, Layer } from "effect"
import { monotonicMillis } from "../serving/Monotonic.js"

/** One timer, reused: at most one countdown at a time. */
export interface Timer {
  /** Calls the timer's action once `durationMs` have passed on the Clock, unless cancelled or started again first. */
  readonly start: (durationMs: number) => void
  /** Starts the current countdown again from now, with the same duration. */
  readonly restart: () => void
  readonly cancel: () => void
}

export interface DeadlinesService {
  readonly timer: (onExpiry: () => void) => Timer
}

/** A timer is its own list entry: one object per timer, its methods on the prototype. */
class Entry implements Timer {
  at = 0
  prev: Entry | undefined = undefined
  next: Entry | undefined = undefined
  lane: Lane | undefined = undefined

  constructor(
    private readonly laneFor: (durationMs: number) => Lane,
    readonly onExpiry: () => void
  ) {}

  start(durationMs: number): void {
    this.lane?.unlink(this)
    this.laneFor(durationMs).append(this)
  }

  restart(): void {
    const lane = this.lane
    if (lane === undefined) return
    lane.unlink(this)
    lane.append(this)
  }

  cancel(): void {
    this.lane?.unlink(this)
  }
}

/** One duration's timers, oldest first, and the fiber that fires them. */
class Lane {
  private head: Entry | undefined
  private tail: Entry | undefined
  private wake: (() => void) | undefined

  constructor(
    readonly durationMs: number,
    private readonly now: () => number
  ) {}

  append(entry: Entry): void {
    entry.at = this.now() + this.durationMs
    entry.prev = this.tail
    entry.next = undefined
    entry.lane = this
    if (this.tail === undefined) this.head = entry
    else this.tail.next = entry
    this.tail = entry
    const wake = this.wake
    this.wake = undefined
    wake?.()
  }

  unlink(entry: Entry): void {
    if (entry.lane !== this) return
    entry.lane = undefined
    if (entry.prev === undefined) this.head = entry.next
    else entry.prev.next = entry.next
    if (entry.next === undefined) this.tail = entry.prev
    else entry.next.prev = entry.prev
    entry.prev = entry.next = undefined
  }

  /** Fires what is due, then sleeps until the next head is due or a timer is added. */
  readonly run: Effect.Effect<never> = Effect.suspend((): Effect.Effect<never> => {
    const head = this.head
    if (head === undefined) {
      return Effect.andThen(
        Effect.callback<void>((resume) => {
          this.wake = () => resume(Effect.void)
        }),
        this.run
      )
    }
    const left = head.at - this.now()
    if (left > 0) return Effect.andThen(Effect.sleep(left), this.run)
    this.unlink(head)
    try {
      head.onExpiry()
    } catch {
      // A timer's action is the caller's; one that throws must not stop the others.
    }
    return this.run
  })
}

export const makeDeadlines = Effect.gen(function* () {
  const clock = yield* Clock.Clock
  const context = yield* Effect.context<never>()
  const scope = yield* Effect.scope
  const now = () => monotonicMillis(clock)
  const lanes = new Map<number, Lane>()
  const run = Effect.runForkWith(context)

  const laneFor = (durationMs: number): Lane => {
    let lane = lanes.get(durationMs)
    if (lane === undefined) {
      lane = new Lane(durationMs, now)
      lanes.set(durationMs, lane)
      run(Effect.forkIn(lane.run, scope))
    }
    return lane
  }

  const service: DeadlinesService = { timer: (onExpiry) => new Entry(laneFor, onExpiry) }
  return service
})

export class Deadlines extends Context.Service<Deadlines, DeadlinesService>()("pinboard/Deadlines") {
  static readonly layer = Layer.effect(Deadlines, makeDeadlines)
}
