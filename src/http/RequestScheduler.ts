// The scheduler of the request fibers: one queue for all of them, drained in a microtask, so
// that fibers resumed in one turn of the event loop (a batch of resolves answered by one Redis
// reply, say) run in one drain. Effect's default scheduler gives every fiber a dispatcher of its
// own, each drained in a setImmediate of its own, after the pending I/O; this one drains before
// it and, after 2048 drains in a row, yields with setImmediate, so that I/O gets its turn.
// `npm run bench:effect` measures the difference.
import type { Fiber } from "effect"
import { Scheduler } from "effect"

/** Drains in a row before I/O gets its turn. */
const MAX_DRAINS_IN_A_ROW = 2048

/** The scheduler, and the one dispatcher it gives every fiber that runs on it. */
export interface RequestScheduler extends Scheduler.Scheduler, Scheduler.SchedulerDispatcher {}

class MicrotaskScheduler implements RequestScheduler {
  readonly executionMode = "async" as const
  /** Lower priorities first; tasks of one priority in the order they came. */
  private buckets: Array<[priority: number, tasks: Array<() => void>]> = []
  private running = false
  private inARow = 0

  /** As Effect's default: a fiber yields once it has spent its operation budget. */
  shouldYield(fiber: Fiber.Fiber<unknown, unknown>): boolean {
    return fiber.currentOpCount >= fiber.cache.maxOpsBeforeYield
  }

  makeDispatcher(): Scheduler.SchedulerDispatcher {
    return this
  }

  scheduleTask(task: () => void, priority: number): void {
    const buckets = this.buckets
    let index = 0
    while (index < buckets.length && buckets[index]![0] < priority) index++
    const bucket = buckets[index]
    if (bucket !== undefined && bucket[0] === priority) bucket[1].push(task)
    else buckets.splice(index, 0, [priority, [task]])
    if (!this.running) {
      this.running = true
      this.next()
    }
  }

  /** Runs what is queued now, synchronously, until nothing is. */
  flush(): void {
    while (this.buckets.length > 0) this.runQueued()
  }

  private runQueued(): void {
    const buckets = this.buckets
    this.buckets = []
    for (const [, toRun] of buckets) {
      for (let i = 0; i < toRun.length; i++) toRun[i]!()
    }
  }

  private readonly drain = (): void => {
    this.runQueued()
    if (this.buckets.length === 0) {
      this.running = false
      this.inARow = 0
    } else this.next()
  }

  private next(): void {
    if (++this.inARow < MAX_DRAINS_IN_A_ROW) queueMicrotask(this.drain)
    else {
      this.inARow = 0
      // Not a wait but a turn of the event loop for I/O: no Clock has a say in it.
      setImmediate(this.drain)
    }
  }
}

export const makeRequestScheduler = (): RequestScheduler => new MicrotaskScheduler()
