// The all-bucket fan-out on a Redis Cluster (docs/registry-api.md "Partial answers on a Redis
// Cluster"): one pipeline per shard, reported bucket by bucket. A killed master's buckets come
// back unreached (and only they), quickly; once its replica has taken over, the fan-out reaches
// every bucket again.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import keySlot from "cluster-key-slot"
import type { RegistryPolicy } from "../../src/registry/Domain.js"
import { redisBackend, useRedisCluster } from "../support/RedisBackend.js"
import { poll, scaled } from "../support/Time.js"

const BUCKETS = 16
const policy: RegistryPolicy = { leaseMs: 20_000, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: 20_000 }
const beat = { worker: "w1", incarnation: "i1", headroom: 1, draining: false, degraded: false }

describe("the fan-out on a Redis Cluster", () => {
  const live = useRedisCluster({ replicasPerMaster: 1 })

  const offset = async (port: number, field: string) =>
    Number(new RegExp(`^${field}:(\\d+)`, "m").exec(await live.server.cli(port, "INFO", "replication"))?.[1] ?? -1)
  const replicaCaughtUp = async (master: number, replica: number) => {
    const target = await offset(master, "master_repl_offset")
    await poll(async () => (await offset(replica, "slave_repl_offset")) >= target, { timeoutMs: 10_000, reason: `replica ${replica} to catch up` })
  }

  it("a killed master's buckets, and only they, are unreached until its replica takes over", async () => {
    const backend = redisBackend(live.client, "fan", BUCKETS, policy)
    const run = <A>(effect: Effect.Effect<A>) => Effect.runPromise(effect)
    const registered = await run(backend.register(Date.now(), { worker: "w1", incarnation: "i1", advertiseUrl: "http://127.0.0.1:1", namespaces: [{ namespace: "/a", hostname: "", env: "" }], headroom: 1, draining: false, callerKey: undefined }))
    expect(registered.unreached).toEqual([])

    const victim = await live.server.masterOf(keySlot("{fan:0}"))
    const masters = await Promise.all(Array.from({ length: BUCKETS }, (_, b) => live.server.masterOf(keySlot(`{fan:${b}}`))))
    const shard = masters.flatMap((port, b) => (port === victim ? [b] : []))
    // The replica is held (SIGSTOP) while the shard is down, so no failover can overtake the
    // check; first it must have the registration, or the failover would lose it.
    const replica = Number(/^slave0:ip=[^,]*,port=(\d+)/m.exec(await live.server.cli(victim, "INFO", "replication"))![1])
    await replicaCaughtUp(victim, replica)
    const replicaPid = live.server.nodes.find((node) => node.port === replica)!.pid()!
    process.kill(replicaPid, "SIGSTOP")
    try {
      await live.server.kill(victim)
      const started = performance.now()
      const during = await run(backend.heartbeat(Date.now(), beat))
      // About a second (the client's bounded retries); the margin is for a loaded machine.
      expect(performance.now() - started).toBeLessThan(1000 + scaled(1500))
      expect(during.unreached).toEqual(shard)
      expect(during.reached.map(([b]) => b)).toEqual(Array.from({ length: BUCKETS }, (_, b) => b).filter((b) => !shard.includes(b)))
      expect(during.reached.every(([, answer]) => answer._tag === "Renewed")).toBe(true)
    } finally {
      process.kill(replicaPid, "SIGCONT")
    }

    await live.server.waitHealthy()
    const after = await poll(
      async () => {
        const answer = await run(backend.heartbeat(Date.now(), beat))
        return answer.unreached.length === 0 && answer
      },
      { timeoutMs: 10_000, everyMs: 200, reason: "a heartbeat that reaches every bucket after the failover" }
    )
    expect(after.unreached).toEqual([])
    expect(after.reached.every(([, answer]) => answer._tag === "Renewed")).toBe(true)
  }, scaled(40_000))
})
