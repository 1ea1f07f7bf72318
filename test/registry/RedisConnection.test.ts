// The registry's first connection to a Redis Cluster settles while a master is dead
// (src/registry/RedisConnection.ts): a Pinboard started during a failover starts, and its
// client serves once the replica has taken over. ioredis alone leaves the promise of
// `connect()` unsettled when its first ready check asks the dead master. And a client that
// ioredis ends by itself is connected again: ioredis gives up for good when a connection
// attempt is cut short (a Sentinel's +switch-master arriving while it asks the sentinels).
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connectRedis, FIRST_CONNECT_WAIT_MS, type RedisClient } from "../../src/registry/RedisConnection.js"
import { startRedisCluster, type RedisCluster } from "../support/RedisCluster.js"
import { startRedisServer, type RedisServer } from "../support/RedisServer.js"

/** Enough clients that one of them almost surely sends its first ready check to the dead master (1 in 3 each). */
const CLIENTS = 12

const eventuallyAnswers = async (client: RedisClient): Promise<void> => {
  const deadline = performance.now() + 15_000
  for (;;) {
    const pong = await client.ping().catch(() => undefined)
    if (pong === "PONG") return
    if (performance.now() > deadline) throw new Error(`the client never answered (status ${client.status})`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

describe("the registry's first connection", () => {
  let cluster: RedisCluster
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 1000 })
  }, 60_000)
  afterAll(async () => {
    await cluster?.stop()
  })

  it("to a Redis Cluster whose master has just died settles within the wait, and the client serves after the failover", async () => {
    const master = (await cluster.masters())[0]!
    await cluster.syncedReplicaOf(master)
    await cluster.kill(master)
    const scope = Effect.runSync(Scope.make())
    try {
      const took = await Promise.all(
        Array.from({ length: CLIENTS }, async () => {
          const started = performance.now()
          const client = await Effect.runPromise(Scope.provide(connectRedis({ url: undefined, cluster: cluster.seeds.split(",") }), scope))
          return { client, ms: performance.now() - started }
        })
      )
      for (const { ms } of took) expect(ms).toBeLessThan(FIRST_CONNECT_WAIT_MS + 1000)
      await cluster.waitHealthy(30_000)
      for (const { client } of took) await eventuallyAnswers(client)
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 60_000)
})

describe("a client ioredis ends by itself", () => {
  let server: RedisServer
  beforeAll(async () => {
    server = await startRedisServer()
  })
  afterAll(async () => {
    await server?.stop()
  })

  it("is connected again: a reconnection cut short, as a Sentinel's failover message does, does not leave the registry unreachable", async () => {
    const scope = Effect.runSync(Scope.make())
    try {
      const client = await Effect.runPromise(Scope.provide(connectRedis({ url: server.url, cluster: undefined }), scope))
      expect(await client.ping()).toBe("PONG")
      const ended = new Promise<void>((resolve) => client.once("end", () => resolve()))
      // What ioredis's failover detector does on +switch-master: the connector is told to stop while the client connects.
      client.once("connecting", () => (client as unknown as { connector: { disconnect: () => void } }).connector.disconnect())
      ;(client as unknown as { stream: { destroy: () => void } }).stream.destroy()
      await ended
      await eventuallyAnswers(client)
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 30_000)

  it("stays closed once its scope is closed", async () => {
    const scope = Effect.runSync(Scope.make())
    const client = await Effect.runPromise(Scope.provide(connectRedis({ url: server.url, cluster: undefined }), scope))
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await new Promise((resolve) => setTimeout(resolve, 1500))
    expect(client.status).toBe("end")
  })
})
