// A reply the registry's wire does not know (src/registry/WireReply.ts) is a defect, on a real
// redis-server and through the real Registry: the resolve dies with UnexpectedReply naming the
// script and the reply, never fails with a catalogue row such as NoLiveBackends (a 503 a client
// retries for ever), and Pinboard answers `500 internal error`. The forged replies come from a
// script redefined on a test's own client, or from the real resolve.lua over a forged row.
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { redisSection } from "../support/TestConfig.js"
import { Cause, Effect, Exit, Option, Result } from "effect"
import { TestClock } from "effect/testing"
import type { Redis } from "ioredis"
import { bucketOf } from "../../src/contract/Bucket.js"
import type { RegistryPolicy } from "../../src/registry/Domain.js"
import { makeRedisBackend } from "../../src/registry/Redis.js"
import { UnexpectedReply } from "../../src/registry/WireReply.js"
import type { RegistryService } from "../../src/registry/Registry.js"
import { makeRegistry } from "../../src/registry/RegistryOnBackend.js"
import { defineScript } from "../../src/registry/RedisConnection.js"
import { connect, useRedis } from "../support/RedisBackend.js"
import { startPinboard, type TestPinboard } from "../support/TestPinboard.js"

const LEASE = 15_000
const BUCKETS = 4
const T0 = 1_800_000_000_000
const policy: RegistryPolicy = { leaseMs: LEASE, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: LEASE }
const threads = [{ namespace: "/threads", hostname: "", env: "" }]
const request = (id: string) => ({ env: "", namespace: "/threads", id, hostname: "", caller: undefined, affinity: "10.0.0.1", excluded: [] })

const redis = useRedis()

/** resolve.lua's place taken by `lua`: ARGV from 7 on are the batch's queries, one reply each. */
const forgingResolve = async (lua: string): Promise<Redis> => {
  const client = await connect(redis.server.port)
  defineScript(client, "resolve", lua)
  return client
}

/** Answers a kind resolve.lua never sends. */
const UNKNOWN_KIND = `local out = {} for i = 7, #ARGV do out[#out + 1] = "surprise" end return out`
/** Wants a proposal (an empty view payload) on the ask, then answers an unknown kind to it. */
const UNKNOWN_AFTER_PROPOSAL = `
local out = {}
for i = 7, #ARGV do
  local mode = string.match(ARGV[i], "^[^\\n]*\\n[^\\n]*\\n[^\\n]*\\n[^\\n]*\\n[^\\n]*\\n[^\\n]*\\n([^\\n]*)")
  out[#out + 1] = mode == "a" and "choose\\n1\\n0\\ndone\\n0\\n0" or "maybe later"
end
return out`

/** Wants a proposal from a view that must read the bucket afresh (view.lua "members"). */
const WANTS_FULL_READ = `local out = {} for i = 7, #ARGV do out[#out + 1] = "choose\\n1\\n0\\nfull\\n0\\n0" end return out`

/** A registry on `client` with a worker registered and kept alive past the cold start. */
const warmRegistry = (client: Redis, prefix: string, draining = false) =>
  Effect.gen(function* () {
    const registry = makeRegistry(makeRedisBackend(client, { prefix, buckets: BUCKETS, policy }), policy, () => "wind_down")
    yield* TestClock.setTime(T0)
    const { incarnation } = yield* registry.register({ worker: "w-a", advertiseUrl: "http://127.0.0.1:1/w-a", namespaces: threads, headroom: 1, draining, callerKey: undefined })
    for (let beat = 0; beat < 2; beat++) {
      yield* TestClock.adjust(LEASE / 2)
      yield* registry.heartbeat("w-a", { incarnation, headroom: 1, draining, degraded: false })
    }
    return registry
  })

/** The resolve's defect: it must not have failed with any catalogue error. */
const defectOf = (registry: RegistryService, id: string) =>
  Effect.gen(function* () {
    const exit = yield* Effect.exit(registry.resolve(request(id)))
    expect(Exit.isFailure(exit), `resolve answered ${JSON.stringify(exit)}`).toBe(true)
    const cause = (exit as Exit.Failure<unknown, unknown>).cause
    expect(Option.getOrUndefined(Cause.findErrorOption(cause))).toBeUndefined()
    const defect = Result.getOrUndefined(Cause.findDefect(cause))
    expect(defect).toBeInstanceOf(UnexpectedReply)
    return defect as UnexpectedReply
  })

/**
 * A live placement row of `id` written past the registry API, with a line break in a field (the
 * worker id or the epoch): resolve.lua's "placed" reply then has a field too many.
 */
const forgeRow = async (client: Redis, prefix: string, buckets: number, id: string, row: { readonly worker: string; readonly epoch: string }): Promise<void> => {
  const tag = `{${prefix}:${bucketOf("", "/threads", id, buckets)}}`
  await client.hset(`${tag}:w:${row.worker}`, { inc: "i1", lease: "9000000000000000", url: "http://127.0.0.1:1/forged" })
  await client.hset(`${tag}:p:|/threads|${id}`, { env: "", ns: "/threads", id, worker: row.worker, inc: "i1", epoch: row.epoch, placedAt: "1", host: "", tag: "", wd: "0" })
}

describe("an unexpected reply from Redis, through the registry", () => {
  it.effect("an unknown reply kind to the first ask is a defect naming resolve.lua, not NoLiveBackends", () =>
    Effect.gen(function* () {
      const client = yield* Effect.acquireRelease(Effect.promise(() => forgingResolve(UNKNOWN_KIND)), (c) => Effect.sync(() => c.disconnect()))
      const defect = yield* defectOf(yield* warmRegistry(client, "unknown"), "x")
      expect(defect.script).toBe("resolve")
      expect(defect.reply).toBe("surprise")
      expect(defect.message).toBe('resolve.lua answered an unexpected reply: "surprise"')
    })
  )

  it.effect("an unknown reply kind to a proposal is a defect too (it used to answer NoLiveBackends)", () =>
    Effect.gen(function* () {
      const client = yield* Effect.acquireRelease(Effect.promise(() => forgingResolve(UNKNOWN_AFTER_PROPOSAL)), (c) => Effect.sync(() => c.disconnect()))
      const defect = yield* defectOf(yield* warmRegistry(client, "proposal"), "x")
      expect(defect.script).toBe("resolve")
      expect(defect.reply).toBe("maybe later")
    })
  )

  it.effect("a malformed view page read while placing is a defect naming view.lua, not RegistryUnavailable", () =>
    Effect.gen(function* () {
      const client = yield* Effect.acquireRelease(Effect.promise(() => forgingResolve(WANTS_FULL_READ)), (c) => Effect.sync(() => c.disconnect()))
      client.defineCommand("pinboard_view", { numberOfKeys: 1, lua: `return { "page" }` })
      const defect = yield* defectOf(yield* warmRegistry(client, "page"), "x")
      expect(defect.script).toBe("view")
      expect(defect.reply).toEqual(["page"])
    })
  )

  it.effect("the real resolve.lua over a forged row: a malformed reply is a defect naming resolve.lua and the reply", () =>
    Effect.gen(function* () {
      const registry = yield* warmRegistry(redis.client, "row")
      yield* Effect.promise(() => forgeRow(redis.client, "row", BUCKETS, "x", { worker: "w\nforged", epoch: "17" }))
      const defect = yield* defectOf(registry, "x")
      expect(defect.script).toBe("resolve")
      expect(defect.reply).toBe("placed\nw\nforged\nhttp://127.0.0.1:1/forged\n17\n0")
      expect(defect.message).toBe(`resolve.lua answered an unexpected reply: ${JSON.stringify(defect.reply)}`)
    })
  )

  it.effect("the genuine 'none' reply is still NoLiveBackends: only the worker is draining", () =>
    Effect.gen(function* () {
      const registry = yield* warmRegistry(redis.client, "none", true)
      const exit = yield* Effect.exit(registry.resolve(request("x")))
      expect(Exit.isFailure(exit) ? Option.getOrUndefined(Cause.findErrorOption(exit.cause)) : exit).toMatchObject({ _tag: "NoLiveBackends" })
    })
  )
})

describe("an unexpected reply from Redis, through Pinboard", () => {
  let pinboard: TestPinboard
  beforeAll(async () => {
    pinboard = await startPinboard({ redis: redisSection({ url: redis.server.url, prefix: "http" }) })
  })
  afterAll(() => pinboard?.stop())

  // Read field by field, the reply would name a worker and an epoch, and the request would be forwarded.
  it("answers 500 internal error, as a defect", async () => {
    await forgeRow(redis.client, "http", pinboard.config.buckets, "x", { worker: "w-forged", epoch: "17\n18" })
    const answer = await fetch(`${pinboard.url}/threads/x`)
    expect(answer.status).toBe(500)
    expect(await answer.json()).toEqual({ error: "internal error" })
  })
})
