// The scheduler of the request fibers: one queue for all of them, drained in a microtask, so
// that fibers resumed in one turn of the event loop (a batch of resolves answered by one Redis
// reply, say) run in one drain. Effect's default scheduler keeps a runner per fiber (a WeakMap
// entry and a promise job each) and, after 2048 drains in a row, waits for a timer (1 ms at
// least); this one then yields with setImmediate, after the pending I/O. `npm run bench:effect`
// measures the difference.
import { Scheduler } from "effect"

/** Drains in a row before I/O gets its turn. */
const MAX_DRAINS_IN_A_ROW = 2048

export const makeRequestScheduler = (): Scheduler.Scheduler => {
  const tasks = new Scheduler.PriorityBuckets()
  let running = false
  let inARow = 0
  const drain = (): void => {
    const buckets = tasks.buckets
    tasks.buckets = []
    for (const [, toRun] of buckets) {
      for (let i = 0; i < toRun.length; i++) toRun[i]!()
    }
    if (tasks.buckets.length === 0) {
      running = false
      inARow = 0
    } else next()
  }
  const next = (): void => {
    if (++inARow < MAX_DRAINS_IN_A_ROW) queueMicrotask(drain)
    else {
      inARow = 0
      // Not a wait but a turn of the event loop for I/O: no Clock has a say in it.
      setImmediate(drain)
    }
  }
  return Scheduler.make((task, priority) => {
    tasks.scheduleTask(task, priority)
    if (!running) {
      running = true
      next()
    }
  })
}
