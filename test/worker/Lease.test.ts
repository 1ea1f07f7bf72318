// The worker's lease on TestClock (docs/registry-api.md, docs/worker.md): heartbeats every heartbeatMs, healthy while
// the confirmed lease end less the safety margin is ahead, every activation dropped when it is
// not, re-registration after 410, wind-down entries handed on, deregistration; and per bucket,
// when Pinboard reports buckets it could not renew (a Redis Cluster shard down).
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import { bucketOf } from "../../src/contract/Bucket.js"
import { keepLease, type DropReason, type Selection } from "../../src/worker/Lease.js"
import type { HeartbeatAnswer, PlacementRef, RegistryClient, WindDownEntry } from "../../src/worker/RegistryClient.js"
import { flush } from "../support/Turns.js"

const LEASE_MS = 3000
const HEARTBEAT_MS = 1000
const MARGIN_MS = LEASE_MS / 5

/** A clock step, and the fake registry's promise chains it started run to their next wait. */
const advance = (ms: number) => Effect.andThen(TestClock.adjust(ms), flush)

const fakeRegistry = () => {
  const log: Array<string> = []
  const state = {
    register: "ok" as "ok" | "fail",
    heartbeat: "ok" as "ok" | "fail" | "lost",
    windDown: [] as ReadonlyArray<WindDownEntry>,
    registrations: 0,
    buckets: undefined as number | undefined,
    unrenewed: [] as ReadonlyArray<number>
  }
  const client: RegistryClient = {
    register: async () => {
      if (state.register === "fail") throw new Error("connection refused")
      state.registrations++
      log.push("register")
      return {
        incarnation: `inc-${state.registrations}`,
        leaseMs: LEASE_MS,
        heartbeatMs: HEARTBEAT_MS,
        ...(state.buckets === undefined ? {} : { buckets: state.buckets }),
        unrenewed: state.unrenewed
      }
    },
    heartbeat: async (incarnation): Promise<HeartbeatAnswer> => {
      log.push(`heartbeat ${incarnation} ${state.heartbeat}`)
      if (state.heartbeat === "fail") throw new Error("connection refused")
      if (state.heartbeat === "lost") return { _tag: "LeaseLost" }
      return { _tag: "Renewed", windDown: state.windDown, unrenewed: state.unrenewed }
    },
    release: async () => true,
    deregister: async (incarnation) => void log.push(`deregister ${incarnation}`)
  }
  return { client, log, state }
}

const start = (client: RegistryClient) => {
  const drops: Array<DropReason> = []
  const selections: Array<Selection | undefined> = []
  const windDowns: Array<ReadonlyArray<WindDownEntry>> = []
  return Effect.map(
    keepLease(client, {
      drop: (reason, which) => Effect.sync(() => void (drops.push(reason), selections.push(which))),
      windDown: (entries) => Effect.sync(() => void windDowns.push(entries)),
      status: () => ({ headroom: 5, draining: false })
    }),
    (lease) => ({ lease, drops, selections, windDowns })
  )
}

/** One id of /threads per bucket, in bucket order. */
/** One id of `/threads` per bucket, in bucket order. */
const idsByBucket = (buckets: number, env = ""): Array<string> => {
  const ids: Array<string | undefined> = Array.from({ length: buckets })
  for (let n = 0; ids.includes(undefined); n++) ids[bucketOf(env, "/threads", `t${n}`, buckets)] ??= `t${n}`
  return ids as Array<string>
}

const threads = (id: string, env = ""): PlacementRef => ({ env, namespace: "/threads", id })

describe("the worker's lease", () => {
  it.effect("registers, then heartbeats every heartbeatMs and stays healthy", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      const { lease, drops } = yield* start(registry.client)
      yield* flush
      expect(lease.healthy()).toBe(true)
      expect(lease.incarnation()).toBe("inc-1")
      yield* advance(999)
      expect(registry.log).toEqual(["register"])
      yield* advance(1)
      yield* advance(HEARTBEAT_MS)
      yield* advance(HEARTBEAT_MS)
      expect(registry.log.filter((l) => l.startsWith("heartbeat"))).toHaveLength(3)
      yield* advance(10 * HEARTBEAT_MS)
      expect(lease.healthy()).toBe(true)
      expect(drops).toEqual([])
    })
  )

  it.effect("a registration retried for longer than a lease counts the lease from the call that got through", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      registry.state.register = "fail"
      const { lease } = yield* start(registry.client)
      yield* flush
      // The retries, one per advance, until past a whole lease.
      for (const waitMs of [100, 200, 400, 800, 1600, 2000]) yield* advance(waitMs)
      registry.state.register = "ok"
      yield* advance(2000)
      yield* lease.registered
      expect(registry.log).toEqual(["register"])
      expect(lease.healthy()).toBe(true)
    })
  )

  it.effect("heartbeats at a fixed rate: a slow answer does not push the next heartbeat back", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      const sentAt: Array<number> = []
      let answer: (() => void) | undefined
      const slow: RegistryClient = {
        ...registry.client,
        heartbeat: async (incarnation, status) => {
          sentAt.push(clockNow())
          await new Promise<void>((resolve) => (answer = resolve))
          return registry.client.heartbeat(incarnation, status)
        }
      }
      const clock = yield* Clock.Clock
      const clockNow = () => clock.currentTimeMillisUnsafe()
      const started = clockNow()
      yield* start(slow)
      yield* flush
      yield* advance(HEARTBEAT_MS)
      expect(sentAt).toEqual([started + HEARTBEAT_MS])
      // The answer takes 400 ms; the next heartbeat still goes one interval after the first was sent.
      yield* advance(400)
      answer!()
      yield* flush
      yield* advance(HEARTBEAT_MS - 400 - 1)
      expect(sentAt).toHaveLength(1)
      yield* advance(1)
      expect(sentAt).toEqual([started + HEARTBEAT_MS, started + 2 * HEARTBEAT_MS])
    })
  )

  it.effect("heartbeats failing: healthy until the lease end less the margin, then every activation dropped", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      registry.state.heartbeat = "fail"
      const { lease, drops } = yield* start(registry.client)
      yield* flush
      yield* advance(LEASE_MS - MARGIN_MS - 1)
      expect(lease.healthy()).toBe(true)
      expect(drops).toEqual([])
      yield* advance(1)
      expect(lease.healthy()).toBe(false)
      expect(drops).toEqual(["lease-unhealthy"])
      // Retries go on: once a heartbeat gets through, the lease is healthy again.
      registry.state.heartbeat = "ok"
      yield* advance(2000)
      expect(lease.healthy()).toBe(true)
      expect(registry.state.registrations).toBe(1)
      expect(drops).toEqual(["lease-unhealthy"])
    })
  )

  it.effect("a failing heartbeat is retried without end, every 2 s, long after the lease turned unhealthy", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      const { lease, drops } = yield* start(registry.client)
      yield* flush
      registry.state.heartbeat = "fail"
      const attempts = () => registry.log.filter((line) => line === "heartbeat inc-1 fail").length
      yield* advance(LEASE_MS)
      expect(lease.healthy()).toBe(false)
      // Ten leases on, still one attempt per 2 s.
      for (let lapse = 0; lapse < 10 * LEASE_MS; lapse += 2000) {
        const before = attempts()
        yield* advance(1000)
        yield* advance(1000)
        expect(attempts()).toBe(before + 1)
      }
      registry.state.heartbeat = "ok"
      yield* advance(2000)
      expect(lease.healthy()).toBe(true)
      expect(registry.state.registrations).toBe(1)
      expect(drops).toEqual(["lease-unhealthy"])
    })
  )

  it.effect("a 410 drops every activation and registers again", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      const { lease, drops } = yield* start(registry.client)
      yield* flush
      registry.state.heartbeat = "lost"
      yield* advance(HEARTBEAT_MS)
      expect(drops).toEqual(["lease-lost"])
      expect(registry.state.registrations).toBe(2)
      expect(lease.incarnation()).toBe("inc-2")
      registry.state.heartbeat = "ok"
      yield* advance(HEARTBEAT_MS)
      expect(registry.log.at(-1)).toBe("heartbeat inc-2 ok")
      expect(lease.healthy()).toBe(true)
    })
  )

  it.effect("hands on the heartbeat's wind-down entries", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      const entry: WindDownEntry = { namespace: "/threads", id: "t1", env: "", epoch: "4", deadline: 5000 }
      registry.state.windDown = [entry]
      const { windDowns } = yield* start(registry.client)
      yield* flush
      yield* advance(HEARTBEAT_MS)
      expect(windDowns).toEqual([[entry]])
    })
  )

  it.effect("a bucket left unrenewed (a Redis Cluster shard down): only its ids lose the lease", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      registry.state.buckets = 4
      const ids = idsByBucket(4)
      const { lease, drops, selections } = yield* start(registry.client)
      yield* flush
      registry.state.unrenewed = [2]
      // The last renewal of bucket 2 was the registration at 0: it turns unhealthy at LEASE - MARGIN.
      yield* advance(LEASE_MS - MARGIN_MS - 1)
      expect(ids.map((id) => lease.healthyFor(threads(id)))).toEqual([true, true, true, true])
      yield* advance(1)
      expect(ids.map((id) => lease.healthyFor(threads(id)))).toEqual([true, true, false, true])
      expect(lease.healthy()).toBe(false)
      expect(drops).toEqual(["lease-unhealthy"])
      expect(ids.map((id) => selections[0]!(threads(id)))).toEqual([false, false, true, false])
      // Still unrenewed: not dropped again. Once renewed, healthy again.
      yield* advance(HEARTBEAT_MS)
      expect(drops).toHaveLength(1)
      registry.state.unrenewed = []
      yield* advance(HEARTBEAT_MS)
      expect(ids.map((id) => lease.healthyFor(threads(id)))).toEqual([true, true, true, true])
      expect(lease.healthy()).toBe(true)
      // A later lapse of the same bucket drops it again.
      registry.state.unrenewed = [2]
      yield* advance(LEASE_MS)
      expect(drops).toEqual(["lease-unhealthy", "lease-unhealthy"])
    })
  )

  it.effect("in hostname-aware mode the env is part of an id's bucket (docs/protocol.md)", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      registry.state.buckets = 4
      registry.state.unrenewed = [2]
      const { lease } = yield* start(registry.client)
      yield* flush
      const prod = idsByBucket(4, "prod")
      expect(prod.map((id) => lease.healthyFor(threads(id, "prod")))).toEqual([true, true, false, true])
      // An id in the unrenewed bucket without its env, and in another with it.
      let n = 0
      while (!(bucketOf("", "/threads", `t${n}`, 4) === 2 && bucketOf("prod", "/threads", `t${n}`, 4) !== 2)) n++
      expect(lease.healthyFor(threads(`t${n}`))).toBe(false)
      expect(lease.healthyFor(threads(`t${n}`, "prod"))).toBe(true)
    })
  )

  it.effect("a registration that misses a bucket takes no activation there until a heartbeat reaches it", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      registry.state.buckets = 4
      registry.state.unrenewed = [1]
      const ids = idsByBucket(4)
      const { lease, drops } = yield* start(registry.client)
      yield* flush
      expect(ids.map((id) => lease.healthyFor(threads(id)))).toEqual([true, false, true, true])
      registry.state.unrenewed = []
      yield* advance(HEARTBEAT_MS)
      expect(ids.map((id) => lease.healthyFor(threads(id)))).toEqual([true, true, true, true])
      expect(drops).toEqual([])
    })
  )

  it.effect("every bucket unrenewed drops every activation at once", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      registry.state.buckets = 2
      const { drops, selections } = yield* start(registry.client)
      yield* flush
      registry.state.unrenewed = [0, 1]
      yield* advance(LEASE_MS)
      expect(drops).toEqual(["lease-unhealthy"])
      expect(selections).toEqual([undefined])
    })
  )

  it.effect("a custom safety margin moves the point of dropping", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      registry.state.heartbeat = "fail"
      const drops: Array<DropReason> = []
      const lease = yield* keepLease(
        registry.client,
        { drop: (r) => Effect.sync(() => void drops.push(r)), windDown: () => Effect.void, status: () => ({ headroom: 1, draining: false }) },
        { safetyMarginMs: 1500 }
      )
      yield* flush
      yield* advance(1499)
      expect(lease.healthy()).toBe(true)
      yield* advance(1)
      expect(drops).toEqual(["lease-unhealthy"])
    })
  )

  it.effect("deregisters with its incarnation and heartbeats no more", () =>
    Effect.gen(function* () {
      const registry = fakeRegistry()
      const { lease } = yield* start(registry.client)
      yield* flush
      yield* lease.deregister
      expect(registry.log.at(-1)).toBe("deregister inc-1")
      const before = registry.log.length
      yield* advance(5 * HEARTBEAT_MS)
      expect(registry.log.length).toBe(before)
      expect(lease.healthy()).toBe(false)
    })
  )
})
