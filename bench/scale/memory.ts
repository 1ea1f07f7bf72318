// bench:scale's memory scenario: Redis's used_memory (INFO memory) before and after placing
// R new ids among 10 workers, per placement; and the keys (DBSIZE) per placement.
import { fixed, meets, printTable } from "./report.js"
import { dbSize, flushAll, makeScaleRegistry, NAMESPACE, placeIds, policyFor, registerFleet, usedMemory, type ScaleTarget } from "./redis.js"

const WORKERS = 10
/** Long, so no lease lapses while the ids are placed. */
const LEASE_MS = 600_000
const PLACE_CONCURRENCY = 64
const WARM_UP_IDS = 1000
const TARGET_BYTES = 300
const BASELINE_BYTES = 280

/** An id of 12 characters, as the ids of an application might be. */
const idOf = (i: number): string => `id_${i.toString(36).padStart(9, "0")}`

interface MemoryFigures {
  readonly rows: number
  readonly placed: number
  readonly placeS: number
  readonly bytes: number
  readonly keys: number
}

const measureMemory = async (target: ScaleTarget, rows: number): Promise<MemoryFigures> => {
  await flushAll(target)
  const registry = makeScaleRegistry(target.client, `memory${rows}`, policyFor(LEASE_MS))
  await registerFleet(
    registry,
    Array.from({ length: WORKERS }, (_, w) => ({ worker: `w${w}`, headroom: 1 + (w % 10) }))
  )
  // Every bucket's keys of its own made, and the allocator past its first pages.
  await placeIds(registry, Array.from({ length: WARM_UP_IDS }, (_, i) => `warm-${i}`), undefined, PLACE_CONCURRENCY)
  const memoryBefore = await usedMemory(target)
  const keysBefore = await dbSize(target)
  const started = performance.now()
  const ids = Array.from({ length: rows }, (_, i) => idOf(i))
  const placed = (await placeIds(registry, ids, undefined, PLACE_CONCURRENCY)).filter((w) => w !== undefined).length
  const placeS = (performance.now() - started) / 1000
  const memoryAfter = await usedMemory(target)
  const keysAfter = await dbSize(target)
  return { rows, placed, placeS, bytes: (memoryAfter - memoryBefore) / rows, keys: (keysAfter - keysBefore) / rows }
}

export const runMemory = async (target: ScaleTarget, rowCounts: ReadonlyArray<number>): Promise<void> => {
  const results: Array<MemoryFigures> = []
  for (const rows of rowCounts) {
    const figures = await measureMemory(target, rows)
    console.log(`  ${fixed(rows)} ids: ${fixed(figures.placed)} placed in ${fixed(figures.placeS, 1)} s`)
    results.push(figures)
  }
  console.log("\nMemory per placement:")
  printTable([
    ["new ids", "bytes/placement", `target ≤ ${TARGET_BYTES}`, "keys/placement"],
    ...results.map((r) => [fixed(r.rows), fixed(r.bytes), meets(r.bytes, TARGET_BYTES), fixed(r.keys, 2)])
  ])
  console.log(
    `(INFO memory used_memory after minus before placing the ids / ids, ${WORKERS} workers, ids of ${idOf(0).length} characters, ` +
      `namespace ${NAMESPACE}; keys: DBSIZE after minus before / ids; before figure about ${BASELINE_BYTES} bytes)`
  )
}
