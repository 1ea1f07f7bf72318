// A Redis backend on a test's own redis-server, plus a bucket wipe as an operator would do it.
import { Redis } from "ioredis"
import { defineScripts, makeRedisBackend } from "../../src/registry/Redis.js"
import type { RegistryPolicy } from "../../src/registry/Domain.js"

export const connect = async (port: number): Promise<Redis> => {
  const client = new Redis({ port, host: "127.0.0.1", enableAutoPipelining: true, lazyConnect: true })
  defineScripts(client)
  await client.connect()
  return client
}

export const redisBackend = (client: Redis, prefix: string, buckets: number, policy: RegistryPolicy) =>
  makeRedisBackend(client, { prefix, buckets, policy })

/** Deletes every key of one bucket (its hash tag), as a partial wipe of Redis would. */
export const wipeBucket = async (client: Redis, prefix: string, bucket: number): Promise<void> => {
  const keys = await client.keys(`\\{${prefix}:${bucket}\\}*`)
  if (keys.length > 0) await client.del(...keys)
}

export const countKeys = async (client: Redis, prefix: string): Promise<number> =>
  (await client.keys(`\\{${prefix}:*`)).length
