// A Redis backend on a test's own redis-server, plus a bucket wipe as an operator would do it.
import { Redis } from "ioredis"
import { afterAll, beforeAll } from "vitest"
import { startRedisServer, type RedisServer } from "./RedisServer.js"
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
