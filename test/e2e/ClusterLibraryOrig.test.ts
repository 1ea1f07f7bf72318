// Workers on the library when a Redis Cluster shard dies (docs/registry-api.md "Partial
// answers on a Redis Cluster"; docs/worker.md "Per bucket"): Pinboard's heartbeats renew the
// live shards' buckets and name the dead one's in `unrenewed`; the library drops only the
// activations of those buckets when their lease runs out and keeps serving the rest, for
// longer than any lease. The lease is 3 s: every fan-out waits about 0.8 s for the dead shard
// (the client's retries), and a 2 s lease leaves almost no room for that (deploy.md).
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bucketOf, BUCKETS, eventually, uid } from "../support/Fleet.js"
import { LibraryFleet, type LibraryWorker } from "../support/LibraryFleet.js"
import type { RedisCluster } from "../support/RedisCluster.js"
import { quietWindow, scaled } from "../support/Time.js"
import { request } from "../support/Wire.js"

const UNAVAILABLE = '{"error":"registry unavailable, retry"}'
/** Sized for the fan-out's wait on the dead shard and a busy machine, so it scales. */
const LEASE_MS = scaled(3000)

interface State {
  readonly status: number
  readonly worker?: string
  readonly epoch?: string
  readonly text: string
}

describe("library workers on a Redis Cluster that loses a shard", () => {
  const lib = new LibraryFleet()
  let cluster: RedisCluster
  let namespace: string
  let workers: ReadonlyArray<LibraryWorker>

  beforeAll(async () => {
    cluster = await lib.fleet.cluster({ masters: 3, replicasPerMaster: 0 })
    await lib.start({ cluster, leaseMs: LEASE_MS })
    const pair = await lib.pair()
    namespace = pair.namespace
    workers = [pair.a, pair.b]
  }, scaled(60_000))
  afterAll(() => lib.stop())

  const state = async (id: string): Promise<State> => {
    const answer = await request(lib.pinboard, `${namespace}/${id}/state`, { timeoutMs: 5000 })
    if (answer.status !== 200) return { status: answer.status, text: answer.text }
    const body = JSON.parse(answer.text) as { worker: string; epoch: string }
    return { status: 200, worker: body.worker, epoch: body.epoch, text: "" }
  }

  /** Bucket b's keys carry the hash tag {prefix:b}; its master serves that slot. */
  const masterOfBucket = async (bucket: number): Promise<number> => {
    const any = (await cluster.masters())[0]!
    return cluster.masterOf(Number(await cluster.cli(any, "CLUSTER", "KEYSLOT", `{${lib.prefix}:${bucket}}`)))
  }

  it("the dead shard's ids answer 503 and lose their activations; every other id stays on its worker and epoch past two leases", async () => {
    const ids = Array.from({ length: 48 }, () => uid("t"))
    const before = new Map<string, State>()
    for (const id of ids) {
      const first = await state(id)
      expect(first, id).toMatchObject({ status: 200 })
      before.set(id, first)
    }
    const masters = await Promise.all(Array.from({ length: BUCKETS }, (_, b) => masterOfBucket(b)))
    const victim = masters[bucketOf(namespace, ids[0]!)]!
    const deadBuckets = new Set(masters.flatMap((port, b) => (port === victim ? [b] : [])))
    const dead = ids.filter((id) => deadBuckets.has(bucketOf(namespace, id)))
    const alive = ids.filter((id) => !deadBuckets.has(bucketOf(namespace, id)))
    expect(dead.length).toBeGreaterThan(0)
    expect(alive.length).toBeGreaterThan(0)

    await cluster.kill(victim)
    const killedAt = performance.now()
    const wrong: Array<unknown> = []
    // A window, not a wait: the live ids must be shown kept for longer than two leases; it is
    // watched throughout, a round every 200 ms.
    while (performance.now() - killedAt < 2 * LEASE_MS + scaled(1000)) {
      for (const id of alive) {
        const now = await state(id)
        const was = before.get(id)!
        if (now.status !== 200 || now.worker !== was.worker || now.epoch !== was.epoch) wrong.push({ id, now, was })
      }
      for (const id of dead) {
        const now = await state(id)
        if (now.status !== 503 || now.text !== UNAVAILABLE) wrong.push({ id, now })
      }
      await quietWindow(200)
    }
    expect(wrong.slice(0, 5)).toEqual([])

    // Each worker dropped exactly its activations in the dead buckets, for lease-unhealthy.
    const droppedNow = () => workers.flatMap((w) => lib.events(w.id).filter((e) => e.event === "deactivate"))
    await eventually(() => expect(droppedNow().map((e) => e.id).sort()).toEqual([...dead].sort()), 2000)
    const dropped = droppedNow()
    expect(dropped.map((e) => e.id).sort()).toEqual([...dead].sort())
    expect(new Set(dropped.map((e) => e.reason))).toEqual(new Set(["lease-unhealthy"]))
    for (const worker of workers) expect((await lib.listed(worker.id))?.leaseExpiresAt).toBeGreaterThan(Date.now())
  }, scaled(40_000))
})
