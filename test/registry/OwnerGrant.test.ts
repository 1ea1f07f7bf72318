// Release and tag with an owner grant (docs/registry-api.md "Release", "Tag"), on both layers: a
// row whose worker the grant does not cover is HeldByAnotherWorker at any epoch and stays as it
// was; a covered row, or no row, answers as without a grant; without a grant, as before.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import type { OwnerGrant, RegistryPolicy } from "../../src/registry/Domain.js"
import type { RegistryService } from "../../src/registry/Registry.js"
import { makeRegistry } from "../../src/registry/RegistryOnBackend.js"
import { backendSubjects, useRedis } from "../support/RedisBackend.js"

const LEASE = 15_000
const BUCKETS = 4
const T0 = 1_800_000_000_000
const policy: RegistryPolicy = { leaseMs: LEASE, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: LEASE }
const threads = [{ namespace: "/threads", hostname: "", env: "" }]
const WORKERS = ["chat-1", "chat-10", "billing-1"]
const key = (id: string) => ({ env: "", namespace: "/threads", id })

const chatPrefix: OwnerGrant = { exact: [], prefixes: ["chat-"] }
const billingExact: OwnerGrant = { exact: ["billing-1"], prefixes: [] }
const HELD = { _tag: "HeldByAnotherWorker" }

const redis = useRedis()
const subjects = backendSubjects(redis, "grant", BUCKETS, policy).map(
  ([name, make]) => [name, () => makeRegistry(make().backend, policy, () => "wind_down")] as const
)

/** The three workers registered and kept alive past the cold start, and one id placed on each: its epoch by worker. */
const placedOnEach = (registry: RegistryService) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(T0)
    const incarnations = new Map<string, string>()
    for (const worker of WORKERS) {
      const answer = yield* registry.register({ worker, advertiseUrl: `http://127.0.0.1:1/${worker}`, namespaces: threads, headroom: 1, draining: false, callerKey: undefined })
      incarnations.set(worker, answer.incarnation)
    }
    for (const step of [LEASE / 2, LEASE / 2]) {
      yield* TestClock.adjust(step)
      for (const [worker, incarnation] of incarnations) yield* registry.heartbeat(worker, { incarnation, headroom: 1, draining: false, degraded: false })
    }
    const epochs = new Map<string, string>()
    for (const worker of WORKERS) {
      const placed = yield* registry.resolve({ ...key(`of-${worker}`), hostname: "", caller: undefined, affinity: "", excluded: WORKERS.filter((w) => w !== worker) })
      expect(placed.worker).toBe(worker)
      epochs.set(worker, placed.epoch)
    }
    return { incarnations, epochs }
  })

describe.each(subjects)("release and tag with an owner grant (%s)", (_name, make) => {
  it.effect("a row of a worker the grant covers: done at its epoch, a conflict naming it at another", () =>
    Effect.gen(function* () {
      const registry = make()
      const { epochs } = yield* placedOnEach(registry)
      const chat = epochs.get("chat-1")!
      expect(yield* registry.tag(key("of-chat-1"), "1", "x", chatPrefix)).toEqual({ _tag: "Conflict", current: chat })
      expect(yield* registry.tag(key("of-chat-1"), chat, "room 7", chatPrefix)).toEqual({ _tag: "Done" })
      expect((yield* registry.placement(key("of-chat-1"))).tag).toBe("room 7")
      expect(yield* registry.release(key("of-chat-1"), "1", chatPrefix)).toEqual({ _tag: "Conflict", current: chat })
      expect(yield* registry.release(key("of-chat-1"), chat, chatPrefix)).toEqual({ _tag: "Done" })
      const billing = epochs.get("billing-1")!
      expect(yield* registry.tag(key("of-billing-1"), billing, "b", billingExact)).toEqual({ _tag: "Done" })
      expect(yield* registry.release(key("of-billing-1"), billing, billingExact)).toEqual({ _tag: "Done" })
    }))

  it.effect("a row of another worker, at its epoch or any other: HeldByAnotherWorker, and the row stays as it was", () =>
    Effect.gen(function* () {
      const registry = make()
      const { epochs } = yield* placedOnEach(registry)
      const billing = epochs.get("billing-1")!
      const before = yield* registry.placement(key("of-billing-1"))
      for (const epoch of [billing, "1", epochs.get("chat-1")!]) {
        expect(yield* registry.release(key("of-billing-1"), epoch, chatPrefix)).toEqual(HELD)
        expect(yield* registry.tag(key("of-billing-1"), epoch, "mine now", chatPrefix)).toEqual(HELD)
      }
      expect(yield* registry.release(key("of-chat-1"), epochs.get("chat-1")!, billingExact)).toEqual(HELD)
      expect(yield* registry.placement(key("of-billing-1"))).toEqual(before)
      expect((yield* registry.resolve({ ...key("of-billing-1"), hostname: "", caller: undefined, affinity: "", excluded: [] })).isNew).toBe(false)
    }))

  it.effect("no row: a conflict with null, whatever the grant", () =>
    Effect.gen(function* () {
      const registry = make()
      yield* placedOnEach(registry)
      for (const owners of [chatPrefix, billingExact, { exact: [], prefixes: [] }]) {
        expect(yield* registry.release(key("nowhere"), "1", owners)).toEqual({ _tag: "Conflict", current: null })
        expect(yield* registry.tag(key("nowhere"), "1", "x", owners)).toEqual({ _tag: "Conflict", current: null })
      }
    }))

  it.effect("an exact id covers that worker only; a prefix every worker starting with it", () =>
    Effect.gen(function* () {
      const registry = make()
      const { epochs } = yield* placedOnEach(registry)
      const chat10 = epochs.get("chat-10")!
      expect(yield* registry.tag(key("of-chat-10"), chat10, "x", { exact: ["chat-1"], prefixes: [] })).toEqual(HELD)
      expect(yield* registry.tag(key("of-chat-10"), chat10, "x", { exact: [], prefixes: ["chat-10x"] })).toEqual(HELD)
      expect(yield* registry.tag(key("of-chat-10"), chat10, "x", { exact: [], prefixes: [] })).toEqual(HELD)
      expect(yield* registry.tag(key("of-chat-10"), chat10, "x", { exact: ["billing-1", "chat-10"], prefixes: [] })).toEqual({ _tag: "Done" })
      expect(yield* registry.tag(key("of-chat-10"), chat10, "y", { exact: ["billing-1"], prefixes: ["x", "chat-1"] })).toEqual({ _tag: "Done" })
      expect(yield* registry.release(key("of-chat-10"), chat10, { exact: [], prefixes: ["chat-10"] })).toEqual({ _tag: "Done" })
    }))

  it.effect("a row of a lapsed owner not yet swept is still its owner's; an ended incarnation's row is no row", () =>
    Effect.gen(function* () {
      const registry = make()
      const { epochs } = yield* placedOnEach(registry)
      yield* registry.register({ worker: "chat-1", advertiseUrl: "http://127.0.0.1:1/chat-1", namespaces: threads, headroom: 1, draining: false, callerKey: undefined })
      expect(yield* registry.release(key("of-chat-1"), epochs.get("chat-1")!, billingExact)).toEqual({ _tag: "Conflict", current: null })
      yield* TestClock.adjust(LEASE)
      expect((yield* registry.placement(key("of-billing-1"))).live).toBe(false)
      expect(yield* registry.release(key("of-billing-1"), epochs.get("billing-1")!, chatPrefix)).toEqual(HELD)
      expect(yield* registry.release(key("of-billing-1"), epochs.get("billing-1")!, billingExact)).toEqual({ _tag: "Done" })
    }))

  it.effect("without a grant, any worker's row: done or conflict, as before", () =>
    Effect.gen(function* () {
      const registry = make()
      const { epochs } = yield* placedOnEach(registry)
      const billing = epochs.get("billing-1")!
      expect(yield* registry.tag(key("of-billing-1"), "1", "x")).toEqual({ _tag: "Conflict", current: billing })
      expect(yield* registry.tag(key("of-billing-1"), billing, "x")).toEqual({ _tag: "Done" })
      expect(yield* registry.release(key("of-billing-1"), billing)).toEqual({ _tag: "Done" })
      expect(yield* registry.release(key("of-billing-1"), billing)).toEqual({ _tag: "Conflict", current: null })
    }))
})
