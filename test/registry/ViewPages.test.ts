// A membership view far behind its bucket catches up page by page (src/registry/RedisView.ts):
// more changes than one resolve answer carries are read from the change log in pages, a view
// that never read the bucket reads the members in pages, and either way the choice that follows
// is the reference model's.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { bucketOf } from "../../src/contract/Bucket.js"
import type { RegistryPolicy, ResolveQuery, WorkerRegistration } from "../../src/registry/Domain.js"
import { makeMemoryBackend } from "../../src/registry/Memory.js"
import { makeRedisBackend } from "../../src/registry/Redis.js"
import { makeRedisViews, type RedisViews } from "../../src/registry/RedisView.js"
import { modelCandidates, modelChoice } from "../support/ModelPlacement.js"
import { useRedis } from "../support/RedisBackend.js"
import { scaled } from "../support/Time.js"

const BUCKETS = 2
const policy: RegistryPolicy = { leaseMs: 60_000, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: 60_000 }
const T0 = 1_700_000_000_000
/** Past every bucket's cold start. */
const LATER = T0 + policy.leaseMs + 10_000

const redis = useRedis()
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)

/** A Redis backend whose view reads are counted by kind ("log", "members", "short"). */
const countedBackend = (prefix: string) => {
  const reads = new Map<string, number>()
  let views: RedisViews | undefined
  const backend = makeRedisBackend(redis.client, {
    prefix,
    buckets: BUCKETS,
    policy,
    makeViews: (buckets, read, minLeaseLeft) => {
      views = makeRedisViews(
        buckets,
        (bucket, now, args) => {
          reads.set(args[0]!, (reads.get(args[0]!) ?? 0) + 1)
          return read(bucket, now, args)
        },
        minLeaseLeft
      )
      return views
    }
  })
  return { backend, reads, views: () => views! }
}

const registration = (worker: string, headroom: number): WorkerRegistration => ({
  worker,
  incarnation: `inc-${worker}`,
  advertiseUrl: `http://127.0.0.1:1/${worker}`,
  namespaces: [{ namespace: "/n", hostname: "", env: "" }],
  headroom,
  draining: false,
  callerKey: undefined
})

const query = (id: string): ResolveQuery => ({ env: "", namespace: "/n", id, hostname: "", takeover: "wind_down", caller: undefined, affinity: `client-${id}`, excluded: [], r1: 0.25, r2: 0.75 })

describe("a membership view far behind its bucket", () => {
  it("reads the log in pages past one answer's 128 changes, and the members in pages past 256 workers; the choice is the model's", async () => {
    const prefix = "pages"
    const memory = makeMemoryBackend(BUCKETS, policy)
    const pinboard = countedBackend(prefix)
    // Another Pinboard on the same Redis registers the fleet, so this one learns of it only from the bucket.
    const other = makeRedisBackend(redis.client, { prefix, buckets: BUCKETS, policy })
    const registerBoth = (r: WorkerRegistration, at: number) => Promise.all([run(memory.register(at, r)), run(other.register(at, r))])

    // The buckets' first use starts their cold start; the fleet registers once it is over.
    await registerBoth(registration("w-000", 1), T0)
    await registerBoth(registration("w-000", 1), LATER - 1000)
    const first = query("first")
    const bucket = bucketOf("", "/n", "first", BUCKETS)
    expect(await run(pinboard.backend.resolve(bucket, LATER, first))).toMatchObject({ _tag: "Placed", worker: "w-000", isNew: true })
    expect(pinboard.reads.get("members")).toBe(1)

    // 300 workers join: more than the 128 changes an answer carries.
    for (let w = 1; w <= 300; w++) await registerBoth(registration(`w-${String(w).padStart(3, "0")}`, 1 + (w % 7)), LATER - 500 + w)
    const ids = Array.from({ length: 40 }, (_, i) => `id-${i}`).filter((id) => bucketOf("", "/n", id, BUCKETS) === bucket)
    for (const id of ids) {
      const expected = modelChoice(modelCandidates(memory.inspect(bucket), query(id), LATER, policy), query(id), policy)
      const answer = await run(pinboard.backend.resolve(bucket, LATER, query(id)))
      expect(answer).toMatchObject({ _tag: "Placed", worker: expected, isNew: true })
      await run(memory.resolve(bucket, LATER, query(id)))
    }
    expect(pinboard.reads.get("log")).toBeGreaterThanOrEqual(2)
    expect(pinboard.views().view(bucket).records.size).toBe(301)

    // A second Pinboard that never read the bucket: 301 workers are two pages of members.
    const fresh = countedBackend(prefix)
    const id = ids[0]! + "-again"
    const target = bucketOf("", "/n", id, BUCKETS)
    const expected = modelChoice(modelCandidates(memory.inspect(target), query(id), LATER, policy), query(id), policy)
    expect(await run(fresh.backend.resolve(target, LATER, query(id)))).toMatchObject({ _tag: "Placed", worker: expected, isNew: true })
    expect(fresh.reads.get("members")).toBe(2)
    expect(fresh.views().view(target).records.size).toBe(301)
  }, scaled(60_000))
})
