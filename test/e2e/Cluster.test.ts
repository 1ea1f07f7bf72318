// Pinboard on a Redis Cluster end to end (docs/deploy.md "Redis Cluster"; docs/deploy.md, docs/protocol.md, docs/registry-api.md;
// docs/proxy.md "Addressing"): the built Pinboard with PINBOARD_REDIS_CLUSTER, real fixture
// workers, and local clusters whose nodes the tests kill, stop and restart by pid.
//
// - One shard dies for good (no replica): only its buckets answer `503 registry unavailable`,
//   fast; the others keep serving. It comes back empty: cold start for one lease, new epochs.
// - A shard fails over to a replica that missed the last writes: epochs still increase per id
//   and per bucket. (A lost release can bring back the row it ended, with its older epoch:
//   Redis replication is asynchronous; docs/deploy.md says so and what the library does.)
// - Three Pinboard replicas race first requests for the same ids: one owner, one epoch.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  BUCKETS,
  bucketOf,
  Fleet,
  placementOf,
  registryCall,
  uid,
  waitForColdStart,
  type Pinboard
} from "../support/Fleet.js"
import { infoField, type RedisCluster } from "../support/RedisCluster.js"
import { poll, quietWindow, scaled } from "../support/Time.js"
import { headerValues, request } from "../support/Wire.js"

const NS = "/threads"
const UNAVAILABLE = '{"error":"registry unavailable, retry"}'
const COLD_START = '{"error":"registry cold start, retry"}'
const NO_BACKENDS = '{"error":"no live backends for namespace"}'
const UNKNOWN_NAMESPACE = '{"error":"unknown namespace"}'

/**
 * The shard-loss Pinboard's lease: two leases of outage stay short. During the outage every
 * heartbeat waits for the dead shard's 1 s timeout, so a worker renews every third of a lease
 * plus a second: 4 s leaves it over a second of slack (2 s left a third of one, and a busy
 * machine let a live shard's lease lapse). It scales with the rest.
 */
const LEASE_MS = scaled(4000)
/** How soon a dead shard's buckets answer: the registry's 1 s timeout, and slack for the machine. */
const PROMPT_MS = 1000 + scaled(500)
/**
 * The failover Pinboards' lease: longer than a failover plus a heartbeat interval, so the
 * workers' records the replica holds are still live when it takes over (a lapsed lease would
 * end every row there and hide a row brought back from before a lost release).
 */
const FAILOVER_LEASE_MS = 12_000

// ---- one request, as the test sees it ---------------------------------------------------------

interface Probe {
  readonly status: number
  readonly body: string
  readonly contentType: string | undefined
  readonly retryAfter: ReadonlyArray<string>
  readonly ms: number
  /** On a 200 from a fixture worker: who served it, and the Pinboard-Epoch it received. */
  readonly worker?: string
  readonly epoch?: string | undefined
}

const probe = async (pinboard: Pinboard, id: string, headers: Record<string, string> = {}): Promise<Probe> => {
  const started = performance.now()
  try {
    const answer = await request(pinboard, `${NS}/${id}/echo`, { headers, timeoutMs: 5000 })
    const common = {
      status: answer.status,
      body: answer.text,
      contentType: answer.headers["content-type"],
      retryAfter: headerValues(answer.rawHeaders, "retry-after"),
      ms: Math.round(performance.now() - started)
    }
    if (answer.status !== 200) return common
    const echo = JSON.parse(answer.text) as { worker: string; headers: Record<string, string> }
    return { ...common, body: "", worker: echo.worker, epoch: echo.headers["pinboard-epoch"] }
  } catch (error) {
    return { status: 0, body: String(error), contentType: undefined, retryAfter: [], ms: Math.round(performance.now() - started) }
  }
}

const isOwn503 = (p: Probe, body: string) => p.status === 503 && p.body === body && p.contentType === "application/json"
/** docs/registry-api.md: Redis unreachable is `503 registry unavailable, retry` with `Retry-After: 1`. */
const isUnavailable = (p: Probe) => isOwn503(p, UNAVAILABLE) && p.retryAfter.length === 1 && p.retryAfter[0] === "1"
/** Retry-After: the seconds of cold start left, rounded up, at least 1 (docs/protocol.md "Resolution"). */
const isColdStart = (p: Probe, leaseMs: number) =>
  isOwn503(p, COLD_START) && p.retryAfter.length === 1 && /^[1-9][0-9]*$/.test(p.retryAfter[0]!) && Number(p.retryAfter[0]) <= Math.ceil(leaseMs / 1000)

/** Epochs are decimal strings compared as integers (docs/protocol.md). */
const epochOf = (p: Probe): bigint => {
  if (p.epoch === undefined || !/^(0|[1-9][0-9]*)$/.test(p.epoch)) throw new Error(`no decimal Pinboard-Epoch in ${JSON.stringify(p)}`)
  return BigInt(p.epoch)
}

/** Asks again through the answers a recovering registry may give, until a worker serves it. */
const servedEventually = async (pinboard: Pinboard, id: string, leaseMs: number): Promise<Probe> => {
  let last: Probe | undefined
  return poll(
    async () => {
      last = await probe(pinboard, id)
      if (last.status === 200) return last
      const transient = isUnavailable(last) || isColdStart(last, leaseMs) || isOwn503(last, NO_BACKENDS)
      if (!transient) throw new Error(`${id}: ${last.status} ${last.body} after ${last.ms} ms`)
      return undefined
    },
    { timeoutMs: leaseMs + 8000, everyMs: 100, reason: `${id} to be served` }
  ).catch((error: Error) => {
    throw new Error(`${error.message}; last answer: ${last?.status} ${last?.body}`)
  })
}

/** `perBucket` fresh ids in each of `buckets` (all when omitted), by docs/protocol.md's bucket hash. */
const idsIn = (perBucket: number, buckets: ReadonlySet<number> = new Set(Array.from({ length: BUCKETS }, (_, b) => b))): Array<string> => {
  const count = new Map<number, number>()
  const ids: Array<string> = []
  while (ids.length < perBucket * buckets.size) {
    const id = uid("c")
    const bucket = bucketOf(NS, id)
    if (!buckets.has(bucket) || (count.get(bucket) ?? 0) >= perBucket) continue
    count.set(bucket, (count.get(bucket) ?? 0) + 1)
    ids.push(id)
  }
  return ids
}

/** Failures gathered over many requests, reported as a count and the first few. */
const expectNone = (what: string, failures: ReadonlyArray<unknown>) =>
  expect({ what, count: failures.length, first: failures.slice(0, 5) }).toEqual({ what, count: 0, first: [] })

// ---- the cluster's shape --------------------------------------------------------------------------

/** The master serving each bucket of `prefix` now: bucket b's keys carry the hash tag {prefix:b}. */
const masterOfBuckets = async (cluster: RedisCluster, prefix: string): Promise<Array<number>> => {
  const any = (await cluster.masters())[0]!
  return Promise.all(
    Array.from({ length: BUCKETS }, async (_, b) => cluster.masterOf(Number(await cluster.cli(any, "CLUSTER", "KEYSLOT", `{${prefix}:${b}}`))))
  )
}

const bucketsOf = (masters: ReadonlyArray<number>, master: number) =>
  new Set(masters.flatMap((port, bucket) => (port === master ? [bucket] : [])))

/**
 * Freezes the replica (SIGSTOP) and drops its link, so the master's next writes reach no
 * replica: what an asynchronous replica that had not caught up looks like when its master dies.
 * Returns the resume (SIGCONT).
 */
const cutOff = async (cluster: RedisCluster, master: number, replica: number): Promise<() => void> => {
  const pid = cluster.nodes.find((node) => node.port === replica)!.pid()!
  process.kill(pid, "SIGSTOP")
  const resume = () => process.kill(pid, "SIGCONT")
  try {
    await cluster.cli(master, "CLIENT", "KILL", "TYPE", "replica")
  } catch (error) {
    resume()
    throw error
  }
  return resume
}

// ---- the fleets -------------------------------------------------------------------------------

interface Fleets {
  readonly fleet: Fleet
  /** Three masters, no replica: a killed master's slots have nobody to fail over to. */
  readonly bare: RedisCluster
  readonly barePrefix: string
  readonly barePinboard: Pinboard
  /** Three masters with one replica each. */
  readonly replicated: RedisCluster
  readonly replicatedPrefix: string
  /** Three Pinboard processes on `replicated`, one prefix. */
  readonly replicas: ReadonlyArray<Pinboard>
}

const AFFINITY = "x-affinity"

describe("Pinboard on a Redis Cluster", () => {
  let f: Fleets
  beforeAll(async () => {
    const fleet = new Fleet()
    try {
      const [bare, replicated] = await Promise.all([
        fleet.cluster({ masters: 3, replicasPerMaster: 0, nodeTimeoutMs: 1000 }),
        fleet.cluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 1000 })
      ])
      const barePrefix = uid("bare")
      const replicatedPrefix = uid("rep")
      const barePinboard = await fleet.pinboard({ cluster: bare, prefix: barePrefix, leaseMs: LEASE_MS })
      // The affinity header lets each racing request prefer its own worker (docs/protocol.md "Resolution").
      const replicas = await Promise.all(
        [0, 1, 2].map(() =>
          fleet.pinboard({ cluster: replicated, prefix: replicatedPrefix, leaseMs: FAILOVER_LEASE_MS, config: { affinity: { key: `header:${AFFINITY}` } } })
        )
      )
      // Registering starts every bucket's cold start now; the tests wait for what is left of it.
      await Promise.all([
        fleet.worker(barePinboard, { id: uid("wa"), namespaces: [NS] }),
        fleet.worker(barePinboard, { id: uid("wb"), namespaces: [NS] }),
        ...replicas.map((pinboard, i) => fleet.worker(pinboard, { id: uid(`wr${i}`), namespaces: [NS] }))
      ])
      f = { fleet, bare, barePrefix, barePinboard, replicated, replicatedPrefix, replicas }
    } catch (error) {
      await fleet.stop()
      throw error
    }
  }, scaled(60_000))
  afterAll(async () => {
    await f?.fleet.stop()
  })

  it("a dead shard: its buckets answer 503 registry unavailable within 1.5 s, the others keep serving; back empty, one lease of cold start, then new epochs", async () => {
    const pinboard = f.barePinboard
    await waitForColdStart(pinboard, NS)
    const ids = idsIn(4)
    const before = new Map<string, Probe>()
    await Promise.all(ids.map(async (id) => before.set(id, await servedEventually(pinboard, id, LEASE_MS))))

    const masters = await masterOfBuckets(f.bare, f.barePrefix)
    const victim = [...new Set(masters)].sort((x, y) => bucketsOf(masters, y).size - bucketsOf(masters, x).size)[0]!
    const deadBuckets = bucketsOf(masters, victim)
    expect(deadBuckets.size).toBeGreaterThan(0)
    expect(deadBuckets.size).toBeLessThan(BUCKETS)
    const dead = ids.filter((id) => deadBuckets.has(bucketOf(NS, id)))
    const others = ids.filter((id) => !deadBuckets.has(bucketOf(NS, id)))

    // Until the shard comes back: same worker, same epoch. After it: docs/registry-api.md makes the workers
    // register again (the wiped buckets have no record of them, so heartbeats answer 410), which
    // ends their older placements; still every request is served, never at an older epoch.
    const interrupted: Array<unknown> = []
    const checkOthers = async (phase: "outage" | "back") => {
      for (const [i, p] of (await Promise.all(others.map((id) => probe(pinboard, id)))).entries()) {
        const was = before.get(others[i]!)!
        const fine =
          p.status === 200 &&
          (phase === "outage" ? p.worker === was.worker && p.epoch === was.epoch : p.epoch === was.epoch || epochOf(p) > epochOf(was))
        if (!fine) interrupted.push({ phase, id: others[i], status: p.status, body: p.body, worker: p.worker, epoch: p.epoch, was: [was.worker, was.epoch] })
      }
    }

    await f.bare.kill(victim)
    const killedAt = performance.now()
    const notUnavailable: Array<unknown> = []
    // A window, not a wait: the outage must outlast two leases for the live shards' leases and
    // placements to be shown surviving it; it is watched throughout, a round every 200 ms.
    while (performance.now() - killedAt < 2 * LEASE_MS + scaled(1000)) {
      const [answers] = await Promise.all([Promise.all(dead.map((id) => probe(pinboard, id))), checkOthers("outage")])
      for (const [i, p] of answers.entries()) {
        if (!isUnavailable(p) || p.ms > PROMPT_MS) notUnavailable.push({ id: dead[i], status: p.status, body: p.body, retryAfter: p.retryAfter, ms: p.ms })
      }
      await quietWindow(200)
    }
    expectNone("dead-shard answers other than a prompt 503 registry unavailable with Retry-After: 1", notUnavailable)
    expectNone("ids on live shards not served by their worker at their epoch during the outage", interrupted)
    interrupted.length = 0

    await f.bare.restart(victim)
    const restartedAt = performance.now()
    const served = new Map<string, Probe>()
    let firstColdStart: number | undefined
    let firstServed: number | undefined
    const unexpected: Array<unknown> = []
    const round = async () => {
      const [answers] = await Promise.all([
        Promise.all(dead.filter((id) => !served.has(id)).map(async (id) => [id, await probe(pinboard, id)] as const)),
        checkOthers("back")
      ])
      for (const [id, p] of answers) {
        if (p.status === 200) {
          firstServed ??= performance.now()
          served.set(id, p)
        } else if (isColdStart(p, LEASE_MS)) {
          firstColdStart ??= performance.now()
        } else if (p.status === 404 && p.body === UNKNOWN_NAMESPACE && firstColdStart === undefined) {
          // docs/protocol.md "Resolution" checks the bucket's namespaces first: the empty bucket knows none until the
          // workers, told 410 by it, register again; from then on it is in cold start.
        } else if (!isUnavailable(p)) {
          unexpected.push({ id, status: p.status, body: p.body, retryAfter: p.retryAfter, ms: p.ms })
        }
      }
      return served.size === dead.length
    }
    await poll(round, { timeoutMs: LEASE_MS + 10_000, everyMs: 100, reason: "every id of the restarted shard to be served" }).catch(() => undefined)
    expectNone("answers for the restarted shard's ids other than 503 unavailable, 404 before the workers register again, 503 cold start or 200", unexpected)
    expect(served.size).toBe(dead.length)
    expect(firstColdStart).toBeDefined()
    // The buckets came back empty, so their first use starts a cold start of one lease: nothing is
    // placed there sooner than one lease after the node came back, and placements resume about
    // one lease after the cold start was first seen.
    expect(firstServed! - restartedAt).toBeGreaterThanOrEqual(LEASE_MS - 200)
    expect(firstServed! - firstColdStart!).toBeLessThanOrEqual(LEASE_MS + scaled(1000))
    const notGreater = dead.filter((id) => !(epochOf(served.get(id)!) > epochOf(before.get(id)!)))
    expectNone("restarted-shard ids placed again without a greater epoch", notGreater.map((id) => [id, before.get(id)!.epoch, served.get(id)!.epoch]))

    // The shard is back: every id serves from one placement, the one the registry reports.
    await checkOthers("back")
    expectNone("ids on live shards not served, or served at an older epoch, after the restart", interrupted)
    for (const id of dead) {
      const again = await probe(pinboard, id)
      expect({ id, status: again.status, worker: again.worker, epoch: again.epoch }).toEqual({
        id,
        status: 200,
        worker: served.get(id)!.worker,
        epoch: served.get(id)!.epoch
      })
      expect(await placementOf(pinboard, NS, id)).toMatchObject({ worker: again.worker, epoch: again.epoch, live: true })
    }
  }, scaled(40_000))

  it("three Pinboard replicas racing first requests for the same ids agree on one worker and one epoch per id", async () => {
    const replicas = f.replicas
    await waitForColdStart(replicas[0]!, NS)
    const ids = Array.from({ length: 200 }, () => uid("race"))
    // All nine requests of an id (three per replica) at once; ids in waves of 20, so that a busy
    // machine (CI runs the files side by side) does not push registry calls past their timeout.
    const answers: Array<{ id: string; r: number; answer: Probe }> = []
    for (let wave = 0; wave < ids.length; wave += 20) {
      answers.push(
        ...(await Promise.all(
          ids.slice(wave, wave + 20).flatMap((id) =>
            replicas.flatMap((pinboard, r) =>
              [0, 1, 2].map(async () => ({ id, r, answer: await probe(pinboard, id, { [AFFINITY]: randomBytes(6).toString("hex") }) }))
            )
          )
        ))
      )
    }
    expectNone(
      "answers other than 200",
      answers.filter(({ answer }) => answer.status !== 200).map(({ id, r, answer }) => ({ id, r, status: answer.status, body: answer.body }))
    )
    const owners = new Map<string, Set<string>>()
    for (const { id, answer } of answers) owners.set(id, (owners.get(id) ?? new Set()).add(`${answer.worker} @ ${answer.epoch}`))
    expectNone("ids answered by more than one (worker, epoch)", [...owners].filter(([, seen]) => seen.size > 1).map(([id, seen]) => [id, [...seen]]))
    // The racing requests did prefer different workers: agreement was not just one worker winning.
    expect(new Set(answers.map(({ answer }) => answer.worker)).size).toBeGreaterThan(1)

    const disagreeing: Array<unknown> = []
    for (const id of ids) {
      const [owner] = owners.get(id)!
      const rows = await Promise.all(replicas.map((pinboard) => placementOf(pinboard, NS, id)))
      for (const [r, row] of rows.entries()) {
        if (row === undefined || `${row.worker} @ ${row.epoch}` !== owner || !row.live) disagreeing.push({ id, r, row, owner })
      }
    }
    expectNone("placement rows that differ from what the workers were sent", disagreeing)
  }, scaled(30_000))

  /** A master of the replicated cluster whose replica is online, not yet used by a failover test. */
  const failedOver = new Set<number>()
  const pickShard = async () => {
    const masters = await masterOfBuckets(f.replicated, f.replicatedPrefix)
    for (const master of [...new Set(masters)]) {
      if (failedOver.has(master)) continue
      const info = await f.replicated.cli(master, "INFO", "replication")
      if (infoField(info, "connected_slaves") === "1" && bucketsOf(masters, master).size > 0) {
        failedOver.add(master)
        return { master, replica: await f.replicated.syncedReplicaOf(master), buckets: bucketsOf(masters, master) }
      }
    }
    throw new Error("no master with an online replica is left")
  }

  /** Kills the master while its replica is cut off, resumes the replica, waits for it to take over. */
  const failOver = async (master: number, resume: () => void) => {
    try {
      await f.replicated.kill(master)
    } finally {
      resume()
    }
    await f.replicated.waitHealthy()
  }

  it("a failover to a replica that missed the last placements: every new epoch is greater than any seen for the id and in the bucket", async () => {
    const pinboard = f.replicas[0]!
    await waitForColdStart(pinboard, NS)
    const shard = await pickShard()
    const maxSeen = new Map<string, bigint>()
    const bucketMax = new Map<number, bigint>()
    const see = (id: string, p: Probe) => {
      const epoch = epochOf(p)
      if (epoch > (maxSeen.get(id) ?? -1n)) maxSeen.set(id, epoch)
      const bucket = bucketOf(NS, id)
      if (epoch > (bucketMax.get(bucket) ?? -1n)) bucketMax.set(bucket, epoch)
    }

    const kept = idsIn(3, shard.buckets)
    for (const id of kept) see(id, await servedEventually(pinboard, id, FAILOVER_LEASE_MS))
    await f.replicated.syncedReplicaOf(shard.master)
    const resume = await cutOff(f.replicated, shard.master, shard.replica)
    // Placed on the master only: the failover loses these rows and the epochs they advanced.
    const lost = idsIn(3, shard.buckets)
    try {
      for (const id of lost) see(id, await servedEventually(pinboard, id, FAILOVER_LEASE_MS))
    } finally {
      await failOver(shard.master, resume)
    }

    const notGreater: Array<unknown> = []
    const check = (id: string, p: Probe, before: bigint, what: string) => {
      if (!(epochOf(p) > before)) notGreater.push({ what, id, epoch: p.epoch, notAbove: String(before) })
    }
    const bucketMaxBefore = new Map(bucketMax)
    // Rows lost with the master: the next request places the id again.
    for (const id of lost) {
      const p = await servedEventually(pinboard, id, FAILOVER_LEASE_MS)
      check(id, p, maxSeen.get(id)!, "lost row placed again")
      see(id, p)
    }
    // Rows the replica had: released at their current epoch, then placed again.
    for (const id of kept) {
      const current = await servedEventually(pinboard, id, FAILOVER_LEASE_MS)
      see(id, current)
      expect(await registryCall(pinboard, "POST", "/registry/release", { namespace: NS, id, epoch: current.epoch })).toMatchObject({
        status: 200,
        json: { released: true }
      })
      const p = await servedEventually(pinboard, id, FAILOVER_LEASE_MS)
      check(id, p, maxSeen.get(id)!, "released and placed again")
      see(id, p)
    }
    // docs/proxy.md: epochs increase per bucket; a fresh id's epoch tops every epoch minted there before.
    for (const id of idsIn(2, shard.buckets)) {
      check(id, await servedEventually(pinboard, id, FAILOVER_LEASE_MS), bucketMaxBefore.get(bucketOf(NS, id))!, "fresh id in the bucket")
    }
    expectNone("epochs after the failover that are not greater than one seen before", notGreater)
  }, scaled(40_000))
})
