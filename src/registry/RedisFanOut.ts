// How the Redis registry's calls reach the buckets' shards (docs/protocol.md "Cost at scale"):
// an all-bucket fan-out goes as one pipeline per shard (one in all on a single server) and
// reports bucket by bucket, so a dead shard fails only its own buckets.
import keySlot from "cluster-key-slot"
import { Cluster } from "ioredis"
import type { BucketAnswer, BucketCall, Coalesced } from "./Coalescer.js"
import type { RedisClient } from "./RedisConnection.js"

/** Redis TIME from the first master of a Cluster to answer; with none known, why. */
export const firstMasterTime = (cluster: Cluster, whyNoMaster: () => Promise<unknown>): Promise<ReadonlyArray<number | string>> => {
  const masters = cluster.nodes("master")
  return masters.length === 0 ? whyNoMaster().then((why) => Promise.reject(why)) : Promise.any(masters.map((node) => node.time()))
}

/** Bucket by bucket answers, as the coalescer reports them. */
export const coalescedOf = (answers: ReadonlyArray<BucketAnswer>): Coalesced<unknown> => {
  const failed = answers.filter((a) => !a.ok)
  return {
    reached: answers.filter((a) => a.ok).map((a) => [a.bucket, a.value] as const),
    unreached: failed.map((a) => a.bucket),
    ...(failed.length > 0 ? { cause: failed[0]!.value } : {})
  }
}

/** `buckets` grouped by shard (by the nodes serving their hash tag's slot); one group on a single server. */
export const byShard = (client: RedisClient, tags: ReadonlyArray<string>, buckets: ReadonlyArray<number>): ReadonlyArray<ReadonlyArray<number>> => {
  if (!(client instanceof Cluster)) return [buckets]
  const groups = new Map<string, Array<number>>()
  for (const bucket of buckets) {
    const shard = client.slots[keySlot(tags[bucket]!)]?.join(";") ?? ""
    groups.set(shard, [...(groups.get(shard) ?? []), bucket])
  }
  return [...groups.values()]
}

/** Runs one script call per bucket (its own arguments), one pipeline per shard; never fails as a whole. */
export const fanOut = async (client: RedisClient, tags: ReadonlyArray<string>, calls: ReadonlyArray<BucketCall>, command: string): Promise<Array<BucketAnswer>> => {
  const answers: Array<BucketAnswer> = []
  const argsOf = new Map(calls.map((c) => [c.bucket, c.args]))
  await Promise.all(
    byShard(client, tags, calls.map((c) => c.bucket)).map(async (buckets) => {
      const pipeline = client.pipeline() as unknown as Record<string, (...a: Array<string>) => void> & {
        exec: () => Promise<Array<[Error | null, unknown]> | null>
      }
      for (const bucket of buckets) pipeline[command]!(`${tags[bucket]}:cold`, tags[bucket]!, ...argsOf.get(bucket)!)
      const results = await pipeline.exec().catch((cause: unknown) => buckets.map(() => [cause, undefined] as const))
      buckets.forEach((bucket, i) => {
        const [error, value] = results?.[i] ?? [new Error("no reply"), undefined]
        answers.push(error === null ? { bucket, ok: true, value: value as ReadonlyArray<unknown> } : { bucket, ok: false, value: error })
      })
    })
  )
  answers.sort((a, b) => a.bucket - b.bucket)
  // A pipeline does not follow a failover by itself: learn the new masters for the next fan-out.
  if (answers.some((a) => !a.ok) && client instanceof Cluster) client.refreshSlotsCache()
  return answers
}
