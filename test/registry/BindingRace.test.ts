// Two registrations that race through two Pinboards (each with its own Redis connection) for the
// same (hostname, namespace), with equal epochs and different envs (docs/proxy.md "Hostname-aware mode"): the first to be
// decided wins, the other is answered 409, and every bucket ends bound to the winner's env. Each
// bucket decides alike, so only the order the buckets see the two in could split them; the
// registry decides bindings in bucket 0 before the other buckets see a registration.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import type { Cluster, Redis } from "ioredis"
import type { RegistryPolicy } from "../../src/registry/Domain.js"
import { makeRegistry } from "../../src/registry/RegistryOnBackend.js"
import type { RedisClient } from "../../src/registry/RedisConnection.js"
import { connect, connectCluster, redisBackend, useRedis, useRedisCluster } from "../support/RedisBackend.js"

const BUCKETS = 32
const PAIRS = 30
const policy: RegistryPolicy = { leaseMs: 15_000, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: 15_000 }

const single = useRedis()
const cluster = useRedisCluster()

const LAYERS: ReadonlyArray<readonly [string, () => Promise<readonly [RedisClient, RedisClient]>]> = [
  ["one redis-server", async () => [single.client, await connect(single.server.port)] as const],
  ["a Redis Cluster", async () => [cluster.client, await connectCluster(cluster.server)] as const]
]

describe.each(LAYERS)("racing registrations on %s", (_name, clients) => {
  it.live("one env wins each pair in every bucket, and the other registration gets 409", () =>
    Effect.gen(function* () {
      const [first, second] = yield* Effect.promise(clients)
      const prefix = `race${Math.random().toString(36).slice(2, 8)}`
      const pinboards = [first, second].map((client) => makeRegistry(redisBackend(client, prefix, BUCKETS, policy), policy, () => "wind_down"))
      const register = (pinboard: number, pair: number, env: string) =>
        Effect.result(
          pinboards[pinboard]!.register({
            worker: `${env}-${pair}`,
            advertiseUrl: `http://127.0.0.1:1/${env}-${pair}`,
            namespaces: [{ namespace: "/docs", hostname: `h${pair}.example`, env }],
            headroom: 1,
            draining: false,
            epoch: "1",
            callerKey: undefined
          })
        )
      const outcomes = yield* Effect.forEach(
        Array.from({ length: PAIRS }, (_, pair) => pair),
        (pair) => Effect.all([register(0, pair, "blue"), register(1, pair, "green")], { concurrency: "unbounded" }),
        { concurrency: "unbounded" }
      )
      const boundEnvs = (pair: number) =>
        Effect.promise(() =>
          Promise.all(Array.from({ length: BUCKETS }, (_, b) => (first as Redis | Cluster).hget(`{${prefix}:${b}}:b:h${pair}.example|/docs`, "env")))
        )
      for (const [pair, [blue, green]] of outcomes.entries()) {
        const winners = [Result.isSuccess(blue) ? "blue" : undefined, Result.isSuccess(green) ? "green" : undefined].filter((env) => env !== undefined)
        expect(winners, `pair ${pair}`).toHaveLength(1)
        const loser = Result.isFailure(blue) ? blue.failure : Result.isFailure(green) ? green.failure : undefined
        expect(loser?._tag).toBe("BindingHeldByAnotherEnv")
        expect(new Set(yield* boundEnvs(pair)), `pair ${pair}`).toEqual(new Set(winners))
      }
      yield* Effect.sync(() => (second as Redis | Cluster).disconnect())
    })
  )
})
