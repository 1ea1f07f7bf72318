// The bucket model on its own (docs/registry-api.md): the reference semantics the embedded
// registry runs and the Lua scripts follow, driven with explicit times and random numbers.
// Exact answers, edges of every time rule included (a lease ends at its expiry, a deadline at
// itself).
import { describe, expect, it } from "@effect/vitest"
import { rowKey, type NamespaceRegistration, type RegistryPolicy, type ResolveQuery, type WorkerRegistration } from "../../src/registry/Domain.js"
import { emptyBucket, type BucketState } from "../../src/registry/BucketState.js"
import * as Model from "../../src/registry/Model.js"

const LEASE = 15_000
const T0 = 1_800_000_000_000
const WARM = T0 + LEASE
const policy: RegistryPolicy = { leaseMs: LEASE, balanceFactor: 1.25, nackThreshold: 3, nackWindowMs: 10_000 }
const threads: ReadonlyArray<NamespaceRegistration> = [{ namespace: "/threads", hostname: "", env: "" }]

const registration = (worker: string, extra: Partial<WorkerRegistration> = {}): WorkerRegistration => ({
  worker,
  incarnation: `${worker}-1`,
  advertiseUrl: `http://${worker}.test/`,
  namespaces: threads,
  headroom: 1,
  draining: false,
  callerKey: undefined,
  ...extra
})

const query = (id: string, extra: Partial<ResolveQuery> = {}): ResolveQuery => ({
  env: "",
  namespace: "/threads",
  id,
  hostname: "",
  takeover: "wind_down",
  caller: undefined,
  affinity: "10.0.0.1",
  excluded: [],
  r1: 0,
  r2: 0,
  ...extra
})

const key = (id: string) => ({ env: "", namespace: "/threads", id })

const beat = (worker: string, extra: Partial<Parameters<typeof Model.heartbeat>[2]> = {}) => ({
  worker,
  incarnation: `${worker}-1`,
  headroom: 1,
  draining: false,
  degraded: false,
  ...extra
})

/** A bucket first used at T0 with the given workers registered then and again at WARM, its cold start over. */
const warmBucket = (...workers: ReadonlyArray<WorkerRegistration>) => {
  const state = emptyBucket()
  for (const reg of workers) Model.register(state, T0, reg, policy)
  for (const reg of workers) Model.register(state, WARM, reg, policy)
  return state
}

const placedOn = (state: BucketState, now: number, id: string, extra: Partial<ResolveQuery> = {}) => {
  const outcome = Model.resolve(state, now, query(id, extra), policy)
  if (outcome._tag !== "Placed") throw new Error(`expected ${id} placed, got ${outcome._tag}`)
  return outcome
}

describe("the bucket's first use and its epochs", () => {
  it("a cold start of one lease from the first use, whatever the operation; the time left is the Retry-After", () => {
    const state = emptyBucket()
    expect(Model.release(state, T0, key("a"), "1")).toEqual({ _tag: "Conflict", current: null })
    Model.register(state, T0 + 5_000, registration("w1"), policy)
    expect(Model.resolve(state, T0 + 5_000, query("a"), policy)).toEqual({ _tag: "ColdStart", retryAfterMs: LEASE - 5_000 })
    expect(Model.resolve(state, WARM - 1, query("a"), policy)).toEqual({ _tag: "ColdStart", retryAfterMs: 1 })
    expect(placedOn(state, WARM, "a").isNew).toBe(true)
  })

  it("a heartbeat, tag, wind-down or resolve that comes first is the first use: the cold start runs from it", () => {
    const firstUses: ReadonlyArray<[string, (state: BucketState) => unknown]> = [
      ["heartbeat", (state) => Model.heartbeat(state, T0, beat("w1"), policy)],
      ["tag", (state) => Model.tag(state, T0, key("a"), "1", "owner")],
      ["wind-down", (state) => Model.beginWindDown(state, T0, key("a"), "1", policy)],
      ["resolve", (state) => Model.resolve(state, T0, query("a"), policy)]
    ]
    for (const [operation, firstUse] of firstUses) {
      const state = emptyBucket()
      firstUse(state)
      Model.register(state, WARM - 1, registration("w1"), policy)
      expect(Model.resolve(state, WARM, query("a"), policy)._tag, `first use: ${operation}`).toBe("Placed")
    }
  })

  it("the first epoch is the time followed by six zeros; then one more each, never below the clock's floor", () => {
    const state = warmBucket(registration("w1"))
    expect(placedOn(state, WARM, "a").epoch).toBe(`${WARM}000000`)
    expect(placedOn(state, WARM, "b").epoch).toBe(`${WARM}000001`)
    expect(placedOn(state, WARM, "c").epoch).toBe(`${WARM}000002`)
    expect(placedOn(state, WARM + 1, "d").epoch).toBe(`${WARM + 1}000000`)
  })

  it("the counter starts at the first use's time followed by six zeros: with no cold start, a placement in that millisecond is above it", () => {
    const instant: RegistryPolicy = { ...policy, leaseMs: 0 }
    const state = emptyBucket()
    Model.register(state, T0, registration("w1"), instant)
    const outcome = Model.resolve(state, T0, query("a"), instant)
    expect(outcome).toMatchObject({ _tag: "Placed", epoch: `${T0}000001` })
  })

  it("a placement answers its owner's advertised URL; asked again, the same placement, not new", () => {
    const state = warmBucket(registration("w1"))
    const first = placedOn(state, WARM, "a")
    expect(first).toEqual({ _tag: "Placed", worker: "w1", advertiseUrl: "http://w1.test/", epoch: `${WARM}000000`, isNew: true })
    expect(Model.resolve(state, WARM + 1, query("a"), policy)).toEqual({ ...first, isNew: false })
  })
})

describe("registration and heartbeats", () => {
  it("an unknown namespace is 404; a namespace once registered stays known after its workers leave", () => {
    const state = warmBucket(registration("w1"))
    expect(Model.resolve(state, WARM, query("a", { namespace: "/rooms" }), policy)).toEqual({ _tag: "UnknownNamespace" })
    expect(Model.resolve(state, WARM, query("a", { env: "prod" }), policy)).toEqual({ _tag: "UnknownNamespace" })
    Model.deregister(state, "w1", "w1-1")
    expect(Model.resolve(state, WARM, query("a"), policy)).toEqual({ _tag: "NoLiveBackends" })
  })

  it("a heartbeat renews the lease for one lease from now; at the lease's expiry it is too late", () => {
    const state = warmBucket(registration("w1"))
    expect(Model.heartbeat(state, WARM + LEASE - 1, beat("w1"), policy)).toEqual({ _tag: "Renewed", windDown: [] })
    expect(Model.workers(state, WARM + LEASE, policy)[0]!.leaseExpiresAt).toBe(WARM + 2 * LEASE - 1)
    expect(Model.heartbeat(state, WARM + 2 * LEASE - 2, beat("w1"), policy)._tag).toBe("Renewed")
    expect(Model.heartbeat(state, WARM + 3 * LEASE - 2, beat("w1"), policy)).toEqual({ _tag: "LeaseLost" })
  })

  it("a heartbeat from another incarnation, or from a worker the bucket does not know, is lease lost and changes nothing", () => {
    const state = warmBucket(registration("w1"))
    const before = Model.workers(state, WARM, policy)
    expect(Model.heartbeat(state, WARM + 1, beat("w1", { incarnation: "w1-0", headroom: 9 }), policy)).toEqual({ _tag: "LeaseLost" })
    expect(Model.heartbeat(state, WARM + 1, beat("w2"), policy)).toEqual({ _tag: "LeaseLost" })
    expect(Model.workers(state, WARM, policy)).toEqual(before)
  })

  it("a heartbeat carries headroom, draining and degraded into the worker's record", () => {
    const state = warmBucket(registration("w1"))
    Model.heartbeat(state, WARM + 1, beat("w1", { headroom: 7, draining: true, degraded: true }), policy)
    expect(Model.workers(state, WARM + 1, policy)).toEqual([
      { worker: "w1", advertiseUrl: "http://w1.test/", namespaces: threads, headroom: 7, leaseExpiresAt: WARM + 1 + LEASE, draining: true, degraded: true, nacks: 0 }
    ])
  })

  it("a new incarnation ends the old one's placements and memberships, and keeps its nack window", () => {
    const state = warmBucket(registration("w1"), registration("w2"))
    placedOn(state, WARM, "a", { caller: "w1" })
    Model.nack(state, WARM, "w1", policy)
    Model.register(state, WARM + 1, registration("w1", { incarnation: "w1-2", namespaces: [{ namespace: "/rooms", hostname: "", env: "" }] }), policy)
    expect(Model.placement(state, WARM + 1, key("a"))).toBeUndefined()
    // w1 left /threads with its old incarnation: only w2 is a candidate there now.
    expect(placedOn(state, WARM + 1, "b", { caller: "w1" }).worker).toBe("w2")
    expect(Model.workers(state, WARM + 1, policy).find((w) => w.worker === "w1")).toMatchObject({ nacks: 1, degraded: false, leaseExpiresAt: WARM + 1 + LEASE })
  })

  it("the same registration again keeps the worker a member once", () => {
    const state = warmBucket(registration("w1"))
    Model.register(state, WARM, registration("w1"), policy)
    expect(state.members.get("|/threads")).toEqual(new Set(["w1"]))
  })

  it("deregistration by the current incarnation removes the worker, its placements and its memberships; another incarnation's does nothing", () => {
    const state = warmBucket(registration("w1"), registration("w2"))
    placedOn(state, WARM, "a", { caller: "w1" })
    Model.deregister(state, "w1", "w1-0")
    expect(Model.workers(state, WARM, policy).map((w) => w.worker)).toEqual(["w1", "w2"])
    expect(Model.placement(state, WARM, key("a"))?.live).toBe(true)
    Model.deregister(state, "w1", "w1-1")
    expect(Model.workers(state, WARM, policy).map((w) => w.worker)).toEqual(["w2"])
    expect(Model.placement(state, WARM, key("a"))).toBeUndefined()
    expect(state.members.get("|/threads")).toEqual(new Set(["w2"]))
    expect(state.rowsByWorker.has("w1")).toBe(false)
    Model.deregister(state, "w2", "w2-1")
    expect(state.members.has("|/threads")).toBe(false)
  })
})

describe("liveness of a placement", () => {
  it("live while the owner's lease runs and its wind-down deadline is ahead; not at either", () => {
    const state = warmBucket(registration("w1"))
    placedOn(state, WARM, "a")
    expect(Model.placement(state, WARM + LEASE - 1, key("a"))?.live).toBe(true)
    expect(Model.placement(state, WARM + LEASE, key("a"))?.live).toBe(false)
    const epoch = Model.placement(state, WARM, key("a"))!.epoch
    expect(Model.beginWindDown(state, WARM + 10, key("a"), epoch, policy)).toEqual({ _tag: "WindingDown", deadline: WARM + 10 + LEASE })
    Model.heartbeat(state, WARM + LEASE - 1, beat("w1"), policy)
    expect(Model.placement(state, WARM + 10 + LEASE - 1, key("a"))?.live).toBe(true)
    expect(Model.placement(state, WARM + 10 + LEASE, key("a"))?.live).toBe(false)
  })

  it("a placement whose owner registered again is not live, and its view names the new advertised URL", () => {
    const state = warmBucket(registration("w1"))
    placedOn(state, WARM, "a")
    const row = state.rows.get(rowKey(key("a")))!
    Model.register(state, WARM + 1, registration("w1", { incarnation: "w1-2", advertiseUrl: "http://w1.other/" }), policy)
    // The model deletes the old incarnation's rows; one left behind (as a lagging replica has) is not live.
    state.rows.set(rowKey(key("a")), row)
    expect(Model.placement(state, WARM + 1, key("a"))).toMatchObject({ live: false, advertiseUrl: "http://w1.other/", worker: "w1" })
  })

  it("a placement whose owner is gone has no advertised URL", () => {
    const state = warmBucket(registration("w1"))
    placedOn(state, WARM, "a")
    const row = state.rows.get(rowKey(key("a")))!
    state.workers.delete("w1")
    expect(Model.placement(state, WARM, key("a"))).toEqual({ ...row, advertiseUrl: null, live: false })
  })

  it("an id whose placement ended is placed anew, on a live worker, at a higher epoch", () => {
    const state = warmBucket(registration("w1"), registration("w2"))
    const first = placedOn(state, WARM, "a", { caller: "w1" })
    Model.heartbeat(state, WARM + LEASE - 1, beat("w2"), policy)
    const again = placedOn(state, WARM + LEASE, "a", { caller: "w1" })
    expect(again).toMatchObject({ worker: "w2", isNew: true })
    expect(BigInt(again.epoch) > BigInt(first.epoch)).toBe(true)
    expect(state.rowsByWorker.get("w1")).toBeUndefined()
    expect(state.rowsByWorker.get("w2")).toEqual(new Set([rowKey(key("a"))]))
  })
})

describe("the heartbeat's wind-down list and the sweep", () => {
  it("lists the worker's placements with a deadline still ahead, with their epoch and deadline", () => {
    const state = warmBucket(registration("w1"))
    const a = placedOn(state, WARM, "a")
    placedOn(state, WARM, "b")
    const c = placedOn(state, WARM, "c")
    Model.beginWindDown(state, WARM, key("a"), a.epoch, policy)
    Model.beginWindDown(state, WARM + 5, key("c"), c.epoch, policy)
    expect(Model.heartbeat(state, WARM + LEASE - 1, beat("w1"), policy)).toEqual({
      _tag: "Renewed",
      windDown: [
        { env: "", namespace: "/threads", id: "a", epoch: a.epoch, deadline: WARM + LEASE },
        { env: "", namespace: "/threads", id: "c", epoch: c.epoch, deadline: WARM + 5 + LEASE }
      ]
    })
    expect(Model.heartbeat(state, WARM + LEASE, beat("w1"), policy)).toEqual({
      _tag: "Renewed",
      windDown: [{ env: "", namespace: "/threads", id: "c", epoch: c.epoch, deadline: WARM + 5 + LEASE }]
    })
  })

  it("removes lapsed workers with their placements, and placements at their deadline; keeps the rest", () => {
    const state = warmBucket(registration("w1"), registration("w2"))
    const a = placedOn(state, WARM, "a", { caller: "w1" })
    placedOn(state, WARM, "b", { caller: "w1" })
    placedOn(state, WARM, "c", { caller: "w2" })
    Model.beginWindDown(state, WARM, key("a"), a.epoch, policy)
    Model.heartbeat(state, WARM + LEASE - 1, beat("w1"), policy)
    Model.sweep(state, WARM + LEASE - 1)
    expect(state.rows.size).toBe(3)
    expect(Model.workers(state, WARM + LEASE - 1, policy).map((w) => w.worker)).toEqual(["w1", "w2"])
    Model.sweep(state, WARM + LEASE)
    expect([...state.rows.keys()]).toEqual([rowKey(key("b"))])
    expect(Model.workers(state, WARM + LEASE, policy).map((w) => w.worker)).toEqual(["w1"])
    expect(state.rowsByWorker.get("w1")).toEqual(new Set([rowKey(key("b"))]))
    expect(state.rowsByWorker.has("w2")).toBe(false)
    Model.sweep(state, WARM + 2 * LEASE - 1)
    expect(Model.workers(state, WARM + 2 * LEASE - 1, policy)).toEqual([])
    expect(state.rows.size).toBe(0)
    expect(state.rowsByWorker.size).toBe(0)
  })
})

describe("release, tag and wind-down: compare-and-set on the epoch", () => {
  it("release at the placement's epoch ends it; at another epoch, or with none, a conflict naming the current one", () => {
    const state = warmBucket(registration("w1"))
    const a = placedOn(state, WARM, "a")
    expect(Model.release(state, WARM, key("a"), "1")).toEqual({ _tag: "Conflict", current: a.epoch })
    expect(Model.release(state, WARM, key("a"), a.epoch)).toEqual({ _tag: "Done" })
    expect(Model.placement(state, WARM, key("a"))).toBeUndefined()
    expect(state.rowsByWorker.has("w1")).toBe(false)
    expect(Model.release(state, WARM, key("a"), a.epoch)).toEqual({ _tag: "Conflict", current: null })
  })

  it("release keeps the worker's other placements", () => {
    const state = warmBucket(registration("w1"))
    const a = placedOn(state, WARM, "a")
    placedOn(state, WARM, "b")
    Model.release(state, WARM, key("a"), a.epoch)
    expect(state.rowsByWorker.get("w1")).toEqual(new Set([rowKey(key("b"))]))
  })

  it("tag sets the owner tag at the placement's epoch only", () => {
    const state = warmBucket(registration("w1"))
    const a = placedOn(state, WARM, "a")
    expect(Model.tag(state, WARM, key("a"), "1", "x")).toEqual({ _tag: "Conflict", current: a.epoch })
    expect(Model.tag(state, WARM, key("b"), a.epoch, "x")).toEqual({ _tag: "Conflict", current: null })
    expect(Model.placement(state, WARM, key("a"))?.tag).toBe("")
    expect(Model.tag(state, WARM, key("a"), a.epoch, "session-9")).toEqual({ _tag: "Done" })
    expect(Model.placement(state, WARM, key("a"))).toMatchObject({ tag: "session-9", epoch: a.epoch, live: true })
  })

  it("a wind-down gets a deadline one lease away, kept on a second call; at another epoch a conflict", () => {
    const state = warmBucket(registration("w1"))
    const a = placedOn(state, WARM, "a")
    expect(Model.beginWindDown(state, WARM, key("a"), "1", policy)).toEqual({ _tag: "Conflict", current: a.epoch })
    expect(Model.beginWindDown(state, WARM, key("b"), a.epoch, policy)).toEqual({ _tag: "Conflict", current: null })
    expect(Model.beginWindDown(state, WARM + 3, key("a"), a.epoch, policy)).toEqual({ _tag: "WindingDown", deadline: WARM + 3 + LEASE })
    expect(Model.beginWindDown(state, WARM + 9, key("a"), a.epoch, policy)).toEqual({ _tag: "WindingDown", deadline: WARM + 3 + LEASE })
    expect(Model.placement(state, WARM + 9, key("a"))?.windDownAt).toBe(WARM + 3 + LEASE)
  })
})

describe("nacks (docs/registry-api.md \"Nack window\")", () => {
  it("count within a fixed window from the first; the threshold degrades; the window's end starts a new one", () => {
    const state = warmBucket(registration("w1"))
    const view = (now: number) => Model.workers(state, now, policy)[0]!
    Model.nack(state, WARM, "w1", policy)
    Model.nack(state, WARM + 1, "w1", policy)
    expect(view(WARM + 1)).toMatchObject({ nacks: 2, degraded: false })
    Model.nack(state, WARM + 9_999, "w1", policy)
    expect(view(WARM + 9_999)).toMatchObject({ nacks: 3, degraded: true })
    expect(Model.resolve(state, WARM + 9_999, query("a"), policy)).toEqual({ _tag: "NoLiveBackends" })
    expect(view(WARM + 10_000)).toMatchObject({ nacks: 0, degraded: false })
    Model.nack(state, WARM + 10_000, "w1", policy)
    expect(view(WARM + 10_000)).toMatchObject({ nacks: 1, degraded: false })
    expect(state.workers.get("w1")).toMatchObject({ nackWindowStart: WARM + 10_000, nackCount: 1 })
  })

  it("a nack for a worker the bucket does not know changes nothing", () => {
    const state = warmBucket(registration("w1"))
    Model.nack(state, WARM, "w2", policy)
    expect([...state.workers.keys()]).toEqual(["w1"])
  })

  it("workers are listed in id order, self-reported degradation included", () => {
    const state = warmBucket(registration("w3"), registration("w1"), registration("w2"))
    Model.heartbeat(state, WARM, beat("w2", { degraded: true }), policy)
    expect(Model.workers(state, WARM, policy).map((w) => [w.worker, w.degraded])).toEqual([
      ["w1", false],
      ["w2", true],
      ["w3", false]
    ])
  })
})

describe("candidates of a new placement", () => {
  it("draining, degraded, excluded and short-of-lease workers take none", () => {
    const state = warmBucket(registration("w1"), registration("w2", { draining: true }))
    expect(Model.resolve(state, WARM, query("a", { caller: "w2" }), policy)).toMatchObject({ worker: "w1" })
    expect(Model.resolve(state, WARM, query("b", { excluded: ["w1"] }), policy)).toEqual({ _tag: "NoLiveBackends" })
    Model.heartbeat(state, WARM, beat("w1", { degraded: true }), policy)
    expect(Model.resolve(state, WARM, query("c"), policy)).toEqual({ _tag: "NoLiveBackends" })
    Model.heartbeat(state, WARM, beat("w1"), policy)
    expect(Model.resolve(state, WARM + LEASE - 5_000, query("d"), policy)).toMatchObject({ worker: "w1" })
    expect(Model.resolve(state, WARM + LEASE - 4_999, query("e"), policy)).toEqual({ _tag: "NoLiveBackends" })
  })

  it("are taken in worker id order, whatever the registration order: the random numbers pick the same worker", () => {
    // The rendezvous winner on 10.0.0.1 is w3, below mean / balanceFactor: two random choices decide.
    const forward = warmBucket(registration("w1", { headroom: 10 }), registration("w2", { headroom: 0 }), registration("w3", { headroom: 0 }))
    const backward = warmBucket(registration("w3", { headroom: 0 }), registration("w2", { headroom: 0 }), registration("w1", { headroom: 10 }))
    // i = 0 and j = 1 in id order: w1 and w2, and w1 has more headroom.
    expect(placedOn(backward, WARM, "first", { r1: 0, r2: 0 }).worker).toBe("w1")
    for (const [r1, r2] of [[0, 0], [0.5, 0], [0.9, 0.9], [0.1, 0.6]] as const) {
      for (const id of ["a", "b", "c"]) {
        expect(placedOn(backward, WARM, `${id}${r1}${r2}`, { r1, r2 }).worker).toBe(placedOn(forward, WARM, `${id}${r1}${r2}`, { r1, r2 }).worker)
      }
    }
  })
})

describe("hostname-aware mode in the model (docs/proxy.md \"Hostname-aware mode\")", () => {
  const docs = (hostname: string, env: string): NamespaceRegistration => ({ namespace: "/docs", hostname, env })
  const hostQuery = (id: string, hostname: string, env: string, extra: Partial<ResolveQuery> = {}) =>
    query(id, { namespace: "/docs", hostname, env, ...extra })
  const docsKey = (id: string, env: string) => ({ env, namespace: "/docs", id })

  it("a registration refused for a binding changes nothing; an accepted one sets its bindings", () => {
    const state = warmBucket(registration("p1", { namespaces: [docs("a.example", "prod")], epoch: "5" }))
    expect(Model.register(state, WARM, registration("d1", { namespaces: [docs("a.example", "dev")], epoch: "5" }), policy)).toEqual({ _tag: "BindingConflict" })
    expect(state.workers.has("d1")).toBe(false)
    expect(state.namespaces.has("dev|/docs")).toBe(false)
    expect(Model.resolve(state, WARM, hostQuery("x", "a.example", "prod"), policy)).toMatchObject({ _tag: "Placed", worker: "p1" })
    expect(Model.resolve(state, WARM, hostQuery("x", "b.example", "prod"), policy)).toEqual({ _tag: "UnknownNamespace" })
    expect(Model.resolve(state, WARM, hostQuery("x", "a.example", "dev"), policy)).toEqual({ _tag: "Rebound", env: "prod" })
  })

  it("a registration without an epoch binds at epoch 0", () => {
    const state = warmBucket(registration("p1", { namespaces: [docs("a.example", "prod")] }))
    expect(state.bindings.get("a.example\n/docs")).toEqual({ env: "prod", epoch: "0", displacedUntil: 0 })
  })

  it("only workers registered for the request's hostname are candidates", () => {
    const state = warmBucket(
      registration("p1", { namespaces: [docs("a.example", "prod")] }),
      registration("p2", { namespaces: [docs("b.example", "prod")] })
    )
    for (const id of ["x", "y", "z"]) {
      expect(placedOn(state, WARM, id, { namespace: "/docs", env: "prod", hostname: "a.example", caller: "p2" }).worker).toBe("p1")
      expect(placedOn(state, WARM, `${id}2`, { namespace: "/docs", env: "prod", hostname: "b.example", caller: "p1" }).worker).toBe("p2")
    }
  })

  it("through another hostname: deny is 503 held; wind_down sets the deadline and answers the time left, then places anew", () => {
    const state = warmBucket(
      registration("p1", { namespaces: [docs("a.example", "prod")] }),
      registration("p2", { namespaces: [docs("b.example", "prod")] })
    )
    const placed = placedOn(state, WARM, "x", { namespace: "/docs", env: "prod", hostname: "a.example" })
    expect(Model.resolve(state, WARM, hostQuery("x", "b.example", "prod", { takeover: "deny" }), policy)).toEqual({ _tag: "HeldByAnotherHostname" })
    expect(Model.placement(state, WARM, docsKey("x", "prod"))?.windDownAt).toBe(0)
    expect(Model.resolve(state, WARM + 100, hostQuery("x", "b.example", "prod"), policy)).toEqual({ _tag: "TakeoverInProgress", retryAfterMs: LEASE })
    expect(Model.placement(state, WARM, docsKey("x", "prod"))?.windDownAt).toBe(WARM + 100 + LEASE)
    expect(Model.resolve(state, WARM + 600, hostQuery("x", "b.example", "prod"), policy)).toEqual({ _tag: "TakeoverInProgress", retryAfterMs: LEASE - 500 })
    // Its own hostname is still forwarded until the deadline.
    expect(Model.resolve(state, WARM + 600, hostQuery("x", "a.example", "prod"), policy)).toEqual({ ...placed, isNew: false })
    Model.heartbeat(state, WARM + LEASE - 1, beat("p2"), policy)
    expect(Model.resolve(state, WARM + 100 + LEASE, hostQuery("x", "b.example", "prod"), policy)).toMatchObject({ _tag: "Placed", worker: "p2", isNew: true })
  })

  it("an owner registered for two hostnames keeps its placement through either", () => {
    const state = warmBucket(
      registration("p1", { namespaces: [docs("a.example", "prod"), docs("c.example", "prod")] }),
      registration("p2", { namespaces: [docs("b.example", "prod")] })
    )
    const placed = placedOn(state, WARM, "x", { namespace: "/docs", env: "prod", hostname: "a.example" })
    expect(Model.resolve(state, WARM, hostQuery("x", "c.example", "prod", { takeover: "deny" }), policy)).toEqual({ ...placed, isNew: false })
    expect(Model.resolve(state, WARM, hostQuery("x", "b.example", "prod", { takeover: "deny" }), policy)).toEqual({ _tag: "HeldByAnotherHostname" })
  })

  it("a placement reached through the hostname it was placed through is forwarded, whatever its owner's registration names", () => {
    // Outside hostname-aware mode every request has the empty hostname; a registration's hostnames do not matter there.
    const state = warmBucket(registration("p1", { namespaces: [{ namespace: "/docs", hostname: "a.example", env: "" }] }))
    const placed = placedOn(state, WARM, "x", { namespace: "/docs" })
    expect(Model.resolve(state, WARM, query("x", { namespace: "/docs", takeover: "deny" }), policy)).toEqual({ ...placed, isNew: false })
  })

  it("a pair rebound to another env: its new ids wait one lease, with the time left", () => {
    const state = warmBucket(registration("p1", { namespaces: [docs("a.example", "prod")], epoch: "1" }))
    Model.register(state, WARM, registration("d1", { namespaces: [docs("a.example", "dev")], epoch: "2" }), policy)
    expect(Model.resolve(state, WARM + 1, hostQuery("x", "a.example", "prod"), policy)).toEqual({ _tag: "Rebound", env: "dev" })
    expect(Model.resolve(state, WARM + 1, hostQuery("x", "a.example", "dev"), policy)).toEqual({ _tag: "Displaced", retryAfterMs: LEASE - 1 })
    Model.heartbeat(state, WARM + LEASE - 1, beat("d1"), policy)
    expect(Model.resolve(state, WARM + LEASE, hostQuery("x", "a.example", "dev"), policy)).toMatchObject({ _tag: "Placed", worker: "d1" })
  })
})
