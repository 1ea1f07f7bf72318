// A Redis backend on a test's own redis-server or Redis Cluster, plus a bucket wipe as an
// operator would do it.
import { Effect } from "effect"
import { Cluster, Redis } from "ioredis"
import { afterAll, beforeAll } from "vitest"
import { startRedisCluster, type ClusterOptions, type RedisCluster } from "./RedisCluster.js"
import { startRedisServer, type RedisServer } from "./RedisServer.js"
import type { RegistryBackend } from "../../src/registry/RegistryBackend.js"
import { makeMemoryBackend } from "../../src/registry/Memory.js"
import { makeRedisBackend } from "../../src/registry/Redis.js"
import { clusterOptions, defineScripts, type RedisClient } from "../../src/registry/RedisConnection.js"
import { clusterNodes } from "../../src/registry/RedisTarget.js"
import type { RegistryPolicy } from "../../src/registry/Domain.js"
import { scaled } from "./Time.js"

export const connect = async (port: number): Promise<Redis> => {
  const client = new Redis({ port, host: "127.0.0.1", enableAutoPipelining: true, lazyConnect: true })
  defineScripts(client)
  await client.connect()
  return client
}

export const connectCluster = async (cluster: RedisCluster): Promise<Cluster> => {
  const client = new Cluster(clusterNodes(cluster.seeds.split(",")), clusterOptions)
  defineScripts(client)
  await client.connect()
  return client
}

export const redisBackend = (client: RedisClient, prefix: string, buckets: number, policy: RegistryPolicy) =>
  makeRedisBackend(client, { prefix, buckets, policy })

/** A registry backend to test on, and a wipe of one of its buckets. */
export interface BackendSubject {
  readonly backend: RegistryBackend
  readonly wipe: (bucket: number) => Effect.Effect<void>
}

/** The embedded backend and one on `redis` (a fresh key prefix each time), named, for `describe.each`. */
export const backendSubjects = (
  redis: { readonly client: Redis },
  prefix: string,
  buckets: number,
  policy: RegistryPolicy
): ReadonlyArray<readonly [string, () => BackendSubject]> => {
  let made = 0
  return [
    [
      "embedded",
      () => {
        const backend = makeMemoryBackend(buckets, policy)
        return { backend, wipe: (b) => Effect.sync(() => backend.wipe(b)) }
      }
    ],
    [
      "redis",
      () => {
        const keys = `${prefix}${made++}`
        return { backend: redisBackend(redis.client, keys, buckets, policy), wipe: (b) => Effect.promise(() => wipeBucket(redis.client, keys, b)) }
      }
    ]
  ]
}

/** Deletes every key of one bucket (its hash tag), as a partial wipe of Redis would. */
export const wipeBucket = async (client: RedisClient, prefix: string, bucket: number): Promise<void> => {
  for (const node of client instanceof Cluster ? client.nodes("master") : [client]) {
    const keys = await node.keys(`\\{${prefix}:${bucket}\\}*`)
    if (keys.length > 0) await node.del(...keys)
  }
}

export const countKeys = async (client: Redis, prefix: string): Promise<number> =>
  (await client.keys(`\\{${prefix}:*`)).length

/** A local Redis Cluster (three masters, no replicas unless asked) and a connected client for one file. */
export const useRedisCluster = (options: ClusterOptions = { replicasPerMaster: 0 }): { readonly server: RedisCluster; readonly client: Cluster } => {
  const handle = {} as { server: RedisCluster; client: Cluster }
  beforeAll(async () => {
    handle.server = await startRedisCluster(options)
    handle.client = await connectCluster(handle.server)
  }, scaled(60_000))
  afterAll(async () => {
    handle.client?.disconnect()
    await handle.server?.stop()
  })
  return handle
}

/** A redis-server and a connected client for the tests of one file, stopped after them. */
export const useRedis = (): { readonly server: RedisServer; readonly client: Redis } => {
  const handle = {} as { server: RedisServer; client: Redis }
  beforeAll(async () => {
    handle.server = await startRedisServer()
    handle.client = await connect(handle.server.port)
  })
  afterAll(async () => {
    handle.client?.disconnect()
    await handle.server?.stop()
  })
  return handle
}
