// The worker library end to end (docs/worker.md): worker processes built on the built
// library (test/fixtures/library-worker.mjs) behind the built Pinboard on a real redis-server.
// Attestation required, lease health (drop before the lease lapses, refuse new activations,
// nothing new after a 410), epoch fencing through FencedStore, wind-down, idle eviction, the
// call depth limit, a graceful stop, and WebSockets. Each test gets its own pair of workers on a fresh namespace; the affinity header
// steers new placements to the worker a test names.
import { Effect } from "effect"
import { Redis } from "ioredis"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import type { RegistryPolicy } from "../../src/registry/Domain.js"
import { compareEpochs, FencedStore } from "../../src/worker/index.js"
import { bucketOf, BUCKETS, eventually, LEASE_MS, placementOf, registryCall, uid, waitForColdStart } from "../support/Fleet.js"
import { AFFINITY_HEADER, affinityFor, LibraryFleet, mintAttestation, type LibraryWorker } from "../support/LibraryFleet.js"
import { killPid } from "../support/Processes.js"
import { connect, redisBackend, wipeBucket } from "../support/RedisBackend.js"
import { parseResponse, rawExchange, rawUpgradeHead, request, type Answer } from "../support/Wire.js"
import { scaled } from "../support/Time.js"

const JSON_TYPE = "application/json"
const EPOCH = /^(0|[1-9][0-9]*)$/

interface Counted {
  readonly worker: string
  readonly epoch: string
  readonly count: number
}

interface State extends Counted {
  readonly namespace: string
  readonly id: string
  readonly depth: number
  readonly subject: string | null
  readonly scopes: Array<string>
  readonly caller: string | null
}

const lf = new LibraryFleet()

beforeAll(async () => {
  await lf.start()
}, scaled(60_000))

afterAll(async () => {
  await lf.stop()
})

const steer = (affinity: string | undefined) => (affinity === undefined ? {} : { [AFFINITY_HEADER]: affinity })

/** Through Pinboard; `affinity` picks the worker of a new placement. */
const get = (path: string, affinity?: string) => request(lf.pinboard, path, { headers: steer(affinity) })
const post = (path: string, affinity?: string) => request(lf.pinboard, path, { method: "POST", headers: steer(affinity) })

const ok = <A>(answer: Answer): A => {
  if (answer.status !== 200) throw new Error(`expected 200, got ${answer.status}: ${answer.text}`)
  return JSON.parse(answer.text) as A
}

const shape = (answer: Answer) => ({ status: answer.status, contentType: answer.headers["content-type"], body: answer.text })

/** Straight to a worker's port, with the given `Pinboard-Attestation` (or none). */
const direct = (worker: LibraryWorker, path: string, attestation: string | undefined, method = "GET") =>
  request(worker, path, {
    method,
    headers: { host: `127.0.0.1:${worker.port}`, ...(attestation === undefined ? {} : { "pinboard-attestation": attestation }) }
  })

const toward = (target: LibraryWorker, other: LibraryWorker) => affinityFor(target.id, [target.id, other.id])

describe("worker library behind Pinboard (redis registry)", () => {
  it("rejects a request sent straight to the worker without a valid attestation: 401", async () => {
    const { namespace, a, b } = await lf.pair()
    const id = uid()
    const path = `${namespace}/${id}/state`
    const unauthorized = {
      status: 401,
      contentType: JSON_TYPE,
      body: JSON.stringify({ error: "missing or invalid Pinboard-Attestation" })
    }
    const claims = { worker: a.id, namespace, id, epoch: "7" }
    const valid = mintAttestation(claims)
    const [head, payload, signature] = valid.split(".") as [string, string, string]
    const changed = { ...JSON.parse(Buffer.from(payload, "base64url").toString()), epoch: "8" }
    const tampered = `${head}.${Buffer.from(JSON.stringify(changed)).toString("base64url")}.${signature}`

    expect(shape(await direct(a, path, undefined))).toEqual(unauthorized)
    // Forged: signed with a key derived from another token.
    expect(shape(await direct(a, path, mintAttestation(claims, { token: "not-the-deployment-token" })))).toEqual(unauthorized)
    // The right key, but for another worker (aud).
    expect(shape(await direct(a, path, mintAttestation({ ...claims, worker: b.id })))).toEqual(unauthorized)
    // Expired ten minutes ago.
    expect(shape(await direct(a, path, mintAttestation(claims, { nowMs: Date.now() - 600_000 })))).toEqual(unauthorized)
    // A claim changed after signing.
    expect(shape(await direct(a, path, tampered))).toEqual(unauthorized)
    expect(shape(await direct(a, path, "not.a.jws"))).toEqual(unauthorized)
    // An upgrade without one: a bare 401 status line.
    const upgrade = parseResponse((await rawExchange(a.port, rawUpgradeHead(`${namespace}/${id}/ws`))).bytes)
    expect(upgrade.status).toBe(401)
    expect(lf.events(a.id, id)).toEqual([])

    // The control: the same request attested for this worker is served.
    expect(ok<State>(await direct(a, path, valid))).toMatchObject({ worker: a.id, id, epoch: "7", depth: 0 })
  })

  it("on lost heartbeats drops every activation (lease-unhealthy) before the lease lapses at Pinboard; the id then goes to the other worker", async () => {
    const marginMs = 500
    const { namespace, a, b } = await lf.pair({ leaseMarginMs: marginMs })
    const id = uid()
    const toA = toward(a, b)
    const first = ok<Counted>(await post(`${namespace}/${id}/increment`, toA))
    expect(first).toMatchObject({ worker: a.id, count: 1 })

    a.link.setHeartbeats("drop")
    // Ask for the id all along, so B gets it as early as Pinboard allows.
    const answers: Array<{ at: number; status: number; worker?: string }> = []
    const onB = await eventually(async () => {
      const answer = await get(`${namespace}/${id}/state`, toA)
      const at = Date.now()
      const state = answer.status === 200 ? (JSON.parse(answer.text) as State) : undefined
      answers.push({ at, status: answer.status, ...(state === undefined ? {} : { worker: state.worker }) })
      if (state?.worker !== b.id) throw new Error(`not on B yet: ${answer.status} ${answer.text}`)
      return state
    }, 3 * LEASE_MS)

    const leaseEnd = a.link.lastLeaseExpiresAt!
    const eventsOfA = lf.events(a.id, id)
    expect(eventsOfA.map((e) => [e.event, e.epoch, e.reason])).toEqual([
      ["activate", first.epoch, undefined],
      ["deactivate", first.epoch, "lease-unhealthy"]
    ])
    const droppedAt = eventsOfA[1]!.t
    const bActivated = lf.events(b.id, id).find((e) => e.event === "activate")!
    // A let go while its lease still ran at Pinboard (by about the safety margin: the lease is
    // counted from when each heartbeat was sent), and before B first served the id.
    expect(leaseEnd - droppedAt).toBeGreaterThanOrEqual(marginMs / 2)
    expect(droppedAt).toBeLessThan(bActivated.t)
    // A answered nothing after it dropped the id.
    expect(answers.filter((x) => x.worker === a.id && x.at > droppedAt + scaled(50))).toEqual([])

    expect(onB).toMatchObject({ worker: b.id, count: 1 })
    expect(compareEpochs(onB.epoch, first.epoch)).toBe(1)
    expect(await placementOf(lf.pinboard, namespace, id)).toMatchObject({ worker: b.id, epoch: onB.epoch, live: true })
  })

  it("refuses a new activation while its lease is unhealthy (503 Pinned-Refusal), and Pinboard re-places the id on the other worker", async () => {
    const { namespace, a, b } = await lf.pair()
    const toA = toward(a, b)
    // The steering works: a new id with this affinity lands on A while A is healthy.
    expect(ok<State>(await get(`${namespace}/${uid()}/state`, toA)).worker).toBe(a.id)

    // Pinboard still gets A's heartbeats (its lease runs on), but A never hears back.
    const blockedAt = Date.now()
    a.link.setHeartbeats("lose-answers")
    await lf.waitForEvent(a.id, (e) => e.event === "health" && e.healthy === false && e.t >= blockedAt, 2 * LEASE_MS)
    const listed = (await lf.listed(a.id))!
    expect(listed.leaseExpiresAt).toBeGreaterThan(Date.now())

    // Straight to A, attested: the in-band refusal.
    const probeId = uid()
    const probe = mintAttestation({ worker: a.id, namespace, id: probeId, epoch: "1" })
    const refused = await direct(a, `${namespace}/${probeId}/state`, probe)
    expect(shape(refused)).toEqual({ status: 503, contentType: JSON_TYPE, body: JSON.stringify({ error: "lease unhealthy" }) })
    expect(refused.headers["pinned-refusal"]).toBe("lease-unhealthy")
    expect(refused.headers["retry-after"]).toBe("1")

    // Through Pinboard: placed on A, refused, re-placed on B; the client sees B's 200.
    const id = uid()
    const served = ok<State>(await get(`${namespace}/${id}/state`, toA))
    expect(served.worker).toBe(b.id)
    expect(served.epoch).toMatch(EPOCH)
    expect(await placementOf(lf.pinboard, namespace, id)).toMatchObject({ worker: b.id, epoch: served.epoch, live: true })
    await eventually(async () => expect((await lf.listed(a.id))!.nacks).toBe(listed.nacks + 1))
    expect(lf.events(a.id, id)).toEqual([])
    expect(lf.events(a.id, probeId)).toEqual([])
  })

  it("fences a stale activation's write (StaleEpochError, 409) while the new owner's write succeeds", async () => {
    const { namespace, a, b } = await lf.pair()
    const id = uid()
    const key = `${namespace}/${id}`
    const first = ok<Counted>(await post(`${namespace}/${id}/increment`, toward(a, b)))
    expect(first).toMatchObject({ worker: a.id, count: 1 })
    const e1 = first.epoch

    // Pinboard lets go of e1 (A is not told) and the next request places the id on B.
    expect(await registryCall(lf.pinboard, "POST", "/registry/release", { namespace, id, epoch: e1 })).toMatchObject({
      status: 200,
      json: { released: true }
    })
    const second = ok<Counted>(await post(`${namespace}/${id}/increment`, toward(b, a)))
    expect(second).toMatchObject({ worker: b.id, count: 2 })
    const e2 = second.epoch
    expect(compareEpochs(e2, e1)).toBe(1)

    // A's old activation, still alive at e1, tries to write: refused by the store.
    const attestedE1 = mintAttestation({ worker: a.id, namespace, id, epoch: e1 })
    const stale = await direct(a, `${namespace}/${id}/increment`, attestedE1, "POST")
    expect(stale.status).toBe(409)
    expect(JSON.parse(stale.text)).toEqual({ error: "stale epoch", stored: e2 })
    expect(lf.events(a.id, id).filter((e) => e.event === "activate")).toHaveLength(1)

    // The new owner keeps writing.
    expect(ok<Counted>(await post(`${namespace}/${id}/increment`))).toEqual({ worker: b.id, epoch: e2, count: 3 })

    const client = new Redis(lf.redis.url)
    try {
      const stored = await new FencedStore(client).read(key)
      const shown = stored === undefined ? undefined : { epoch: stored.epoch, value: stored.value.toString() }
      expect(shown).toEqual({ epoch: e2, value: "3" })
    } finally {
      client.disconnect()
    }
  })

  it("honours wind-down: the hook runs, the placement is released well before the deadline, and the id is re-placed at a higher epoch", async () => {
    const { namespace, a, b } = await lf.pair()
    const id = uid()
    const first = ok<Counted>(await post(`${namespace}/${id}/increment`, toward(a, b)))
    expect(first.worker).toBe(a.id)

    // This build starts a wind-down only from the registry itself: do it as Pinboard would.
    const client = await connect(lf.redis.port)
    const policy: RegistryPolicy = { leaseMs: LEASE_MS, balanceFactor: 1.25, nackThreshold: 1_000_000, nackWindowMs: 600_000 }
    const backend = redisBackend(client, lf.prefix, BUCKETS, policy)
    const outcome = await Effect.runPromise(
      backend.beginWindDown(bucketOf(namespace, id), Date.now(), { env: "", namespace, id }, first.epoch)
    ).finally(() => client.disconnect())
    if (outcome._tag !== "WindingDown") throw new Error(`wind-down not begun: ${JSON.stringify(outcome)}`)
    const deadline = outcome.deadline

    // The next heartbeat lists it; the hook runs, then the activation goes and is released.
    const releasedAt = await eventually(async () => {
      const row = await placementOf(lf.pinboard, namespace, id)
      if (row !== undefined) throw new Error(`still placed: ${JSON.stringify(row)}`)
      return Date.now()
    }, LEASE_MS)
    expect(releasedAt).toBeLessThan(deadline - LEASE_MS / 4)

    const events = lf.events(a.id, id)
    expect(events.map((e) => [e.event, e.epoch, e.reason])).toEqual([
      ["activate", first.epoch, undefined],
      ["winddown", first.epoch, undefined],
      ["deactivate", first.epoch, "wind-down"]
    ])
    expect(events[1]!.deadline).toBe(deadline)

    const again = ok<State>(await get(`${namespace}/${id}/state`))
    expect(compareEpochs(again.epoch, first.epoch)).toBe(1)
    expect(again.count).toBe(1)
    expect(await placementOf(lf.pinboard, namespace, id)).toMatchObject({ epoch: again.epoch, live: true })
  })

  it("evicts an idle activation and releases its placement at its epoch", async () => {
    const { namespace, a, b } = await lf.pair({ idleMs: 300 })
    const id = uid()
    const first = ok<Counted>(await post(`${namespace}/${id}/increment`, toward(a, b)))
    expect(first.worker).toBe(a.id)

    const evicted = await lf.waitForEvent(a.id, (e) => e.event === "deactivate" && e.id === id, 3000)
    expect(evicted).toMatchObject({ epoch: first.epoch, reason: "idle" })
    await eventually(async () => expect(await placementOf(lf.pinboard, namespace, id)).toBeUndefined())

    const again = ok<State>(await get(`${namespace}/${id}/state`))
    expect(again.count).toBe(1)
    expect(compareEpochs(again.epoch, first.epoch)).toBe(1)
  })

  it("serves no request at an epoch it has released: one that meets an idle eviction in progress lands on a live placement", async () => {
    const { namespace, a, b } = await lf.pair({ a: { idleMs: 300, deactivateMs: 1000 } })
    const id = uid()
    const first = ok<Counted>(await post(`${namespace}/${id}/increment`, toward(a, b)))
    expect(first.worker).toBe(a.id)

    // The eviction has begun (its deactivate hook takes a second, then the placement is
    // released at e1); Pinboard still forwards to A at e1 meanwhile.
    await lf.waitForEvent(a.id, (e) => e.event === "deactivate" && e.id === id, 3000)
    const served = ok<State>(await get(`${namespace}/${id}/state`, toward(a, b)))
    const row = await placementOf(lf.pinboard, namespace, id)
    const activatedOnA = lf.events(a.id, id).filter((e) => e.event === "activate").map((e) => e.epoch)
    // Whoever served it holds the id's live placement at that epoch, and A activated e1 once.
    const placement = row === undefined ? "not placed" : { worker: row.worker, epoch: row.epoch, live: row.live }
    expect({ placement, activatedOnA }).toEqual({
      placement: { worker: served.worker, epoch: served.epoch, live: true },
      activatedOnA: [first.epoch]
    })
  })

  it("lets an instance call chain reach depth 50, and answers 508 to the call that would go deeper", async () => {
    const { namespace } = await lf.pair()
    const id = uid()
    // Outside requests are depth 0; each call goes one deeper; a forward may carry at most 50.
    const deepest = ok<{ id: string; depth: number; caller: string }>(await post(`${namespace}/${id}/chain?to=50`))
    expect(deepest).toMatchObject({ id: `${id}.50`, depth: 50, caller: `${namespace}/${id}.49` })

    const other = uid()
    const tooDeep = await post(`${namespace}/${other}/chain?to=51`)
    const depthExceeded = JSON.stringify({ error: "subrequest depth exceeded" })
    expect(shape(tooDeep)).toEqual({ status: 508, contentType: JSON_TYPE, body: depthExceeded })
    expect(tooDeep.headers["chain-failed-at"]).toBe("50")
    expect(await placementOf(lf.pinboard, namespace, `${other}.50`)).toMatchObject({ live: true })
    expect(await placementOf(lf.pinboard, namespace, `${other}.51`)).toBeUndefined()
  })

  it("stops gracefully on SIGTERM: deactivates (shutdown), deregisters, and the id is served by the other worker right after", async () => {
    const { namespace, a, b } = await lf.pair()
    const id = uid()
    const toA = toward(a, b)
    const first = ok<Counted>(await post(`${namespace}/${id}/increment`, toA))
    expect(first.worker).toBe(a.id)

    killPid(a.pid, "SIGTERM")
    expect(await a.process.exited).toEqual({ code: 0, signal: null })
    expect(lf.events(a.id, id).map((e) => [e.event, e.epoch, e.reason])).toEqual([
      ["activate", first.epoch, undefined],
      ["deactivate", first.epoch, "shutdown"]
    ])
    expect(lf.events(a.id).at(-1)).toMatchObject({ event: "exit", code: 0 })
    expect(await lf.listed(a.id)).toBeUndefined()

    const next = ok<State>(await get(`${namespace}/${id}/state`, toA))
    expect(next).toMatchObject({ worker: b.id, count: 1 })
    expect(compareEpochs(next.epoch, first.epoch)).toBe(1)
  })

  it("carries a WebSocket through Pinboard to the instance, attested, and echoes", async () => {
    const { namespace, a, b } = await lf.pair()
    const id = uid()
    const socket = new WebSocket(`ws://127.0.0.1:${lf.pinboard.port}${namespace}/${id}/ws`, { headers: steer(toward(a, b)) })
    const messages: Array<{ data: Buffer; isBinary: boolean }> = []
    const waiters: Array<() => void> = []
    socket.on("message", (data: Buffer, isBinary) => {
      messages.push({ data, isBinary })
      waiters.shift()?.()
    })
    const next = async () => {
      if (messages.length === 0) await new Promise<void>((resolve) => waiters.push(resolve))
      return messages.shift()!
    }
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once("open", () => resolve())
        socket.once("error", reject)
      })
      const hello = JSON.parse((await next()).data.toString()) as Record<string, unknown>
      expect(hello).toMatchObject({ worker: a.id, namespace, id, depth: 0, caller: null })
      expect(hello.epoch).toMatch(EPOCH)
      expect(await placementOf(lf.pinboard, namespace, id)).toMatchObject({ worker: a.id, epoch: hello.epoch, live: true })

      socket.send("ping")
      expect(await next()).toEqual({ data: Buffer.from("ping"), isBinary: false })
      socket.send(Buffer.from([0, 1, 2, 255]))
      expect(await next()).toEqual({ data: Buffer.from([0, 1, 2, 255]), isBinary: true })
    } finally {
      socket.close()
    }
  })

  // Last: a wiped bucket sends every worker of this file through 410 and re-registration.
  it("after a 410 (a wiped bucket) takes no new activation before it has registered again", async () => {
    const { namespace, a, b } = await lf.pair({ a: { deactivateMs: 2000 } })
    const toA = toward(a, b)
    const held = uid()
    let fresh = uid()
    while (bucketOf(namespace, fresh) === bucketOf(namespace, held)) fresh = uid()
    const wiped = [...Array(BUCKETS).keys()].find((n) => n !== bucketOf(namespace, held) && n !== bucketOf(namespace, fresh))!
    const first = ok<Counted>(await post(`${namespace}/${held}/increment`, toA))
    expect(first.worker).toBe(a.id)

    // docs/registry-api.md: a bucket without A's record makes A's next heartbeat a 410; the other buckets
    // still renew A's lease, so Pinboard keeps placing there.
    const incarnation = a.link.incarnation
    const client = await connect(lf.redis.port)
    await wipeBucket(client, lf.prefix, wiped).finally(() => client.disconnect())
    const lost = await lf.waitForEvent(a.id, (e) => e.event === "deactivate" && e.id === held, 2 * LEASE_MS)
    // The 410 drops it as lease-lost; on a loaded machine a heartbeat can come back late enough that
    // the lease turned unhealthy first, and it went then. The new incarnation below shows the 410
    // either way (test/worker/Lease.test.ts holds the reason on the TestClock).
    expect(["lease-lost", "lease-unhealthy"]).toContain(lost.reason)

    // A is dropping everything (its deactivate hook takes two seconds) and holds no lease it may
    // trust: a new id must be refused there (and so placed on B). B met the wipe too (its own 410,
    // then registering again): for a moment it may not take the id either, and the client gets
    // `503 worker refused activation, retry`, which a client retries (within A's two seconds,
    // with room for a loaded machine's slower re-registration of B).
    const whileDropping = await eventually(async () => ok<State>(await get(`${namespace}/${fresh}/state`, toA)), 1500)
    // Once A has registered again, the old incarnation's placements are over; the id asked for
    // with B's affinity goes (or stays) on B. A must hold no activation of the old incarnation.
    await eventually(() => expect(a.link.incarnation).not.toBe(incarnation), 3 * LEASE_MS)
    const afterwards = ok<State>(await get(`${namespace}/${fresh}/state`, toward(b, a)))
    expect({
      whileDropping: whileDropping.worker,
      afterwards: afterwards.worker,
      onA: lf.events(a.id, fresh).map((e) => [e.event, e.epoch, e.reason])
    }).toEqual({ whileDropping: b.id, afterwards: b.id, onA: [] })

    // The wiped bucket is in cold start again: wait it out for whatever runs next.
    await waitForColdStart(lf.pinboard, namespace)
  })
})
