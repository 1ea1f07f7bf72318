// Reads of the whole fleet in bounded pieces (docs/protocol.md "Cost at scale"): the membership
// page by page, and the placement counts a slice of workers per script call.
import { Effect } from "effect"
import type { RegistryUnavailable } from "../Errors.js"
import type { WorkerView } from "./Domain.js"
import type { PlacementsHeld } from "./Registry.js"
import { reachedAny, type FanOut, type RegistryBackend } from "./RegistryBackend.js"

/** Workers per page when the whole membership is read. */
const WORKERS_PAGE = 256

/** Every worker, in worker id order, read page by page. */
export const allWorkers = (backend: RegistryBackend, at: number): Effect.Effect<ReadonlyArray<WorkerView>, RegistryUnavailable> =>
  Effect.gen(function* () {
    const workers: Array<WorkerView> = []
    for (;;) {
      const page = yield* backend.workers(at, workers.at(-1)?.worker ?? "", WORKERS_PAGE)
      workers.push(...page)
      if (page.length < WORKERS_PAGE) return workers
    }
  })

/** Workers per placement count call: each script call does a bounded slice. */
const HELD_SLICE = 256

const slices = <A>(items: ReadonlyArray<A>, size: number): ReadonlyArray<ReadonlyArray<A>> =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size))

/** Each worker's count, added up over the buckets reached. */
const sumByWorker = (workers: number, out: FanOut<ReadonlyArray<number>>): ReadonlyArray<number> => {
  const sums = new Array<number>(workers).fill(0)
  for (const [, counts] of out.reached) counts.forEach((count, i) => (sums[i]! += Number(count)))
  return sums
}

/** How many placements each of `workers` holds, over every bucket reached, a slice at a time. */
export const placementsHeldBy = (backend: RegistryBackend, at: number, workers: ReadonlyArray<string>): Effect.Effect<PlacementsHeld, RegistryUnavailable> =>
  Effect.forEach(slices(workers, HELD_SLICE), (slice) =>
    Effect.flatMap(backend.placementsHeld(at, slice), reachedAny).pipe(
      Effect.map((out) => ({ counts: sumByWorker(slice.length, out), unreached: out.unreached }))
    )
  ).pipe(
    Effect.map((parts) => ({
      counts: parts.flatMap((part) => part.counts),
      unreached: [...new Set(parts.flatMap((part) => part.unreached))].sort((a, b) => a - b)
    }))
  )
