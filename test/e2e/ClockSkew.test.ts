// One clock for the registry (issue "One clock"), end to end: two Pinboard replicas on one
// redis-server under one prefix, one of them under libfaketime with its wall clock off by a
// constant, fixture workers heartbeating through the healthy replica only.
//
// - 20 s ahead: its sweep must not judge the workers' leases lapsed (no heartbeat answers
//   410, the healthy replica keeps serving every id from its owner at its epoch); the skewed
//   replica itself answers `503 clock offset from the registry too large, retry` and is not ready.
// - 1 h behind, after Redis lost its data (FLUSHALL): its requests, the first after the wipe,
//   must not cut the cold start short for the healthy replica, nor mint epochs at or below the
//   ones the ids held before the wipe.
//
// libfaketime is preloaded into node itself (what `faketime -f <offset>` sets up) rather than
// run as `faketime -f <offset> node dist/main.js`: the faketime binary forks, so the pid the fleet
// kills would be faketime's and Pinboard would outlive the test.
import { execFileSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { BUCKETS, bucketOf, Fleet, registryCall, TOKEN, uid, waitForColdStart, type Pinboard, type Worker } from "../support/Fleet.js"
import type { RedisServer } from "../support/RedisServer.js"
import { poll, scaled } from "../support/Time.js"
import { headerValues, request, type RequestOptions } from "../support/Wire.js"

const NS = "/threads"
const CLOCK_OFFSET = '{"error":"clock offset from the registry too large, retry"}'
const COLD_START = '{"error":"registry cold start, retry"}'
const UNAVAILABLE = '{"error":"registry unavailable, retry"}'
const UNKNOWN_NAMESPACE = '{"error":"unknown namespace"}'
/** `/readyz`'s body while out of bound: the reason names the offset (in ms, as measured). */
const NOT_READY = /^\{"error":"not ready","reason":"clock offset from the registry (19|20)\d\d\d ms, past registry.maxClockOffsetMs"\}$/

/** Short, for a quick test; the fleet's own lease (scaled), well under the skews. */
const LEASE_MS = scaled(2000)

/** The environment `faketime -f <offset>` gives its command (a constant offset, monotonic clock too). */
const fakeClock = (offset: string): Record<string, string> => ({
  LD_PRELOAD: "/usr/$LIB/faketime/libfaketime.so.1",
  FAKETIME: offset
})

// ---- one request, as the test sees it ---------------------------------------------------------

interface Probe {
  readonly status: number
  readonly body: string
  readonly contentType: string | undefined
  readonly retryAfter: ReadonlyArray<string>
  /** On a 200 from a fixture worker: who served it, and the Pinboard-Epoch it received. */
  readonly worker?: string
  readonly epoch?: string | undefined
}

const probe = async (pinboard: Pinboard, path: string, headers: Record<string, string> = {}, options: RequestOptions = {}): Promise<Probe> => {
  try {
    const answer = await request(pinboard, path, { ...options, headers, timeoutMs: 5000 })
    const common = {
      status: answer.status,
      body: answer.text,
      contentType: answer.headers["content-type"],
      retryAfter: headerValues(answer.rawHeaders, "retry-after")
    }
    if (answer.status !== 200 || !path.startsWith(`${NS}/`)) return common
    const echo = JSON.parse(answer.text) as { worker: string; headers: Record<string, string> }
    return { ...common, body: "", worker: echo.worker, epoch: echo.headers["pinboard-epoch"] }
  } catch (error) {
    return { status: 0, body: String(error), contentType: undefined, retryAfter: [] }
  }
}

const ask = (pinboard: Pinboard, id: string) => probe(pinboard, `${NS}/${id}/echo`)

/** The fix's row: `503 {"error":"clock offset from the registry too large, retry"}`, JSON, `Retry-After: 1`. */
const clockRow = { status: 503, body: CLOCK_OFFSET, contentType: "application/json", retryAfter: ["1"] }
const isClockRow = (p: Probe) =>
  p.status === 503 && p.body === CLOCK_OFFSET && p.contentType === "application/json" && p.retryAfter.length === 1 && p.retryAfter[0] === "1"
const rowOf = (p: Probe) => ({ status: p.status, body: p.body, contentType: p.contentType, retryAfter: p.retryAfter })
/** Retry-After: the seconds of cold start left, rounded up, at least 1. */
const isColdStart = (p: Probe) =>
  p.status === 503 && p.body === COLD_START && p.retryAfter.length === 1 && /^[1-9][0-9]*$/.test(p.retryAfter[0]!)
/** A loaded machine may make one Redis call outlast its second: `503 registry unavailable, retry`, not a placement. */
const isUnavailable = (p: Probe) => p.status === 503 && p.body === UNAVAILABLE && p.retryAfter.length === 1 && p.retryAfter[0] === "1"
const isUnknownNamespace = (p: Probe) => p.status === 404 && p.body === UNKNOWN_NAMESPACE
const shown = (p: Probe) => (p.status === 200 ? `200 from ${p.worker} at epoch ${p.epoch}` : `${p.status} ${p.body} (Retry-After ${p.retryAfter.join(",")})`)

/** Epochs are decimal strings compared as integers (docs/protocol.md). */
const epochOf = (p: Probe): bigint => {
  if (p.epoch === undefined || !/^(0|[1-9][0-9]*)$/.test(p.epoch)) throw new Error(`no decimal Pinboard-Epoch in ${JSON.stringify(p)}`)
  return BigInt(p.epoch)
}

/** Failures gathered over many requests, reported as a count and the first few (soft: the next checks still run). */
const expectNone = (what: string, failures: ReadonlyArray<unknown>) =>
  expect.soft({ what, count: failures.length, first: failures.slice(0, 5) }).toEqual({ what, count: 0, first: [] })

/** One fresh id in each bucket of NS (docs/protocol.md's bucket hash): a wipe's first requests touch every bucket. */
const onePerBucket = (): Array<string> => {
  const ids = new Map<number, string>()
  while (ids.size < BUCKETS) {
    const id = uid("c")
    if (!ids.has(bucketOf(NS, id))) ids.set(bucketOf(NS, id), id)
  }
  return [...ids.values()]
}

// ---- two replicas, one of them skewed -----------------------------------------------------------

interface Pair {
  readonly redis: RedisServer
  readonly healthy: Pinboard
  readonly skewed: Pinboard
  readonly workers: ReadonlyArray<Worker>
  readonly ids: ReadonlyArray<string>
  /** Each id as first placed through the healthy replica. */
  readonly placed: ReadonlyMap<string, Probe>
}

/**
 * The healthy replica, two workers on it, one id per bucket placed through it; then the replica
 * whose clock is `offset` off (started last: nothing it does can touch the setup). Everything
 * goes into `fleet`, which the caller stops.
 */
const startPair = async (fleet: Fleet, offset: string): Promise<Pair> => {
  const redis = await fleet.redis()
  const prefix = uid("pb")
  const healthy = await fleet.pinboard({ redis, prefix, leaseMs: LEASE_MS })
  const workers = await Promise.all([uid("wa"), uid("wb")].map((id) => fleet.worker(healthy, { id, namespaces: [NS] })))
  await waitForColdStart(healthy, NS)
  const ids = onePerBucket()
  const placed = new Map<string, Probe>()
  for (const id of ids) {
    const p = await ask(healthy, id)
    if (p.status !== 200) throw new Error(`placing ${id} through the healthy replica: ${shown(p)}`)
    epochOf(p)
    placed.set(id, p)
  }
  const skewed = await fleet.pinboard({ redis, prefix, leaseMs: LEASE_MS, env: fakeClock(offset) })
  // The fix samples Redis TIME every ~2 s: give the skewed replica its first samples (it is
  // then not ready). Today's code is always ready, so this only waits, it does not fail.
  await poll(async () => (await probe(skewed, "/readyz")).status === 503, { timeoutMs: 3000, everyMs: 100, reason: "the skewed replica's clock check" }).catch(
    () => undefined
  )
  return { redis, healthy, skewed, workers, ids, placed }
}

/** The workers' "lease lost" lines so far: each is a heartbeat answered 410 (the worker then registers again). */
const leaseLost = (workers: ReadonlyArray<Worker>) =>
  workers.flatMap((w) => w.process.lines.filter((line) => /lease lost/.test(line)).map((line) => `${w.id}: ${line}`))

/** FLUSHALL on the test's own redis-server (never 6379), with the workers frozen around it and `first`. */
const wipe = async (pair: Pair, first: () => Promise<void>): Promise<number> => {
  if (pair.redis.port === 6379) throw new Error("never the machine's own Redis")
  // Frozen, the workers send no heartbeat (which would touch every wiped bucket) before `first` has.
  for (const w of pair.workers) process.kill(w.pid, "SIGSTOP")
  try {
    const answer = execFileSync("redis-cli", ["-h", "127.0.0.1", "-p", String(pair.redis.port), "FLUSHALL"], { encoding: "utf8" }).trim()
    if (answer !== "OK") throw new Error(`FLUSHALL answered ${answer}`)
    const wipedAt = performance.now()
    await first()
    return wipedAt
  } finally {
    for (const w of pair.workers) process.kill(w.pid, "SIGCONT")
  }
}

const withFleet = async (body: (fleet: Fleet) => Promise<void>): Promise<void> => {
  const fleet = new Fleet()
  try {
    await body(fleet)
  } finally {
    await fleet.stop()
  }
}

describe("one clock for the registry", () => {
  it("a replica 20 s ahead removes no worker: heartbeats through the healthy replica keep their leases, every id stays served; it answers 503 clock offset", async () => {
    await withFleet(async (fleet) => {
      const pair = await startPair(fleet, "+20s")
      const { healthy, skewed, workers, ids, placed } = pair

      // Three leases: the skewed replica sweeps every half lease, so six sweeps or so.
      const off: Array<string> = []
      const started = performance.now()
      while (performance.now() - started < 3 * LEASE_MS) {
        const round = await Promise.all(ids.map((id) => ask(healthy, id)))
        round.forEach((p, i) => {
          const before = placed.get(ids[i]!)!
          if (p.status !== 200 || p.worker !== before.worker || p.epoch !== before.epoch) {
            off.push(`${ids[i]} at ${Math.round(performance.now() - started)} ms: ${shown(p)}, was ${shown(before)}`)
          }
        })
        await new Promise((resolve) => setTimeout(resolve, 100)) // the rounds' cadence
      }

      // The finding itself, through what the healthy replica and the workers show.
      expectNone("heartbeats answered 410 lease lost", leaseLost(workers))
      const listed = await registryCall(healthy, "GET", "/registry/workers")
      expect.soft(listed.status).toBe(200)
      const rows = ((listed.json as { workers?: Array<{ worker: string; leaseExpiresAt: number }> }).workers ?? []).filter((r) =>
        workers.some((w) => w.id === r.worker)
      )
      const now = Date.now()
      expect
        .soft(rows.map((r) => ({ worker: r.worker, leaseInTheFuture: r.leaseExpiresAt > now })))
        .toEqual(workers.map((w) => w.id).sort().map((worker) => ({ worker, leaseInTheFuture: true })))
      expectNone("ids not served by their owner at their epoch through the healthy replica", off)

      // The skewed replica writes nothing and says why.
      const through = await Promise.all(ids.map((id) => ask(skewed, id)))
      expectNone(
        "instance requests through the skewed replica not answered with the clock-offset row",
        through.flatMap((p, i) => (isClockRow(p) ? [] : [`${ids[i]}: ${shown(p)}`]))
      )
      for (const path of ["/registry/workers", `/registry/placements/${NS.slice(1)}/${ids[0]}`]) {
        const p = await probe(skewed, path, { authorization: `Bearer ${TOKEN}` })
        expect.soft({ path, ...rowOf(p) }).toEqual({ path, ...clockRow })
      }
      const beat = await probe(skewed, `/registry/workers/${workers[0]!.id}/heartbeat`, { authorization: `Bearer ${TOKEN}` }, {
        method: "POST",
        body: JSON.stringify({ incarnation: "0123456789abcdef", headroom: 10 })
      })
      expect.soft({ path: "heartbeat", ...rowOf(beat) }).toEqual({ path: "heartbeat", ...clockRow })
      const ready = await probe(skewed, "/readyz")
      expect.soft({ status: ready.status, body: ready.body }).toEqual({ status: 503, body: expect.stringMatching(NOT_READY) })
    })
  }, scaled(60_000))

  it("after Redis lost its data, a replica 1 h behind does not cut the cold start short: nothing is placed through the healthy replica for a lease", async () => {
    await withFleet(async (fleet) => {
      const pair = await startPair(fleet, "-1h")
      const { healthy, skewed, ids, placed } = pair

      // The slow replica's requests are the first to reach the wiped buckets.
      let slow: Array<Probe> = []
      const wipedAt = await wipe(pair, async () => {
        slow = await Promise.all(ids.map((id) => ask(skewed, id)))
      })

      // Then the healthy replica, until a lease (less slack) after the wipe: nothing placed.
      const early: Array<string> = []
      const odd: Array<string> = []
      const answered = new Map<string, Probe>()
      while (performance.now() - wipedAt < LEASE_MS - 500) {
        const pending = ids.filter((id) => !answered.has(id))
        const round = await Promise.all(pending.map(async (id) => [id, await ask(healthy, id), Math.round(performance.now() - wipedAt)] as const))
        for (const [id, p, ms] of round) {
          if (p.status === 200) answered.set(id, p)
          if (ms >= LEASE_MS - 500) continue // answered past the window
          if (p.status === 200) early.push(`${id} placed ${ms} ms after the wipe: ${shown(p)}`)
          else if (!isColdStart(p) && !isUnknownNamespace(p) && !isUnavailable(p)) odd.push(`${id} at ${ms} ms: ${shown(p)}`)
        }
        await new Promise((resolve) => setTimeout(resolve, 100)) // the rounds' cadence
      }
      expectNone(`ids placed through the healthy replica within ${LEASE_MS - 500} ms of the wipe (a lease is ${LEASE_MS} ms)`, early)
      expectNone("answers in the cold start other than 503 registry cold start (or 404 unknown namespace before the workers are back, or 503 registry unavailable)", odd)

      // Placed again once the cold start is over: each at a greater epoch than before the wipe.
      for (const id of ids) {
        if (answered.has(id)) continue
        const p = await poll(async () => {
          const p = await ask(healthy, id)
          return p.status === 200 && p
        }, { timeoutMs: LEASE_MS + 15_000, everyMs: 100, reason: `${id} to be placed again through the healthy replica` })
        answered.set(id, p)
      }
      expectNone(
        "ids placed again at an epoch not above the one before the wipe",
        ids.flatMap((id) => {
          const [before, after] = [epochOf(placed.get(id)!), epochOf(answered.get(id)!)]
          return after > before ? [] : [`${id}: ${before} before the wipe, ${after} after`]
        })
      )

      // The slow replica touched nothing, and said why.
      expectNone(
        "instance requests through the slow replica not answered with the clock-offset row",
        slow.flatMap((p, i) => (isClockRow(p) ? [] : [`${ids[i]}: ${shown(p)}`]))
      )
    })
  }, scaled(60_000))

  it("after Redis lost its data, a replica 1 h behind does not invert fencing: epochs still increase per id across the wipe", async () => {
    await withFleet(async (fleet) => {
      const pair = await startPair(fleet, "-1h")
      const { healthy, skewed, ids, placed } = pair

      await wipe(pair, async () => {
        await Promise.all(ids.map((id) => ask(skewed, id)))
      })

      // Each id asked through the slow replica; through the healthy one only once the slow one
      // answers the clock-offset row (then it places nothing, by the fix), until served.
      const again = new Map<string, { readonly via: string; readonly probe: Probe }>()
      const last = new Map<string, string>()
      await poll(
        async () => {
          await Promise.all(
            ids
              .filter((id) => !again.has(id))
              .map(async (id) => {
                const p = await ask(skewed, id)
                if (p.status === 200) return void again.set(id, { via: "slow", probe: p })
                last.set(id, `slow: ${shown(p)}`)
                if (!isClockRow(p)) return
                const q = await ask(healthy, id)
                if (q.status === 200) return void again.set(id, { via: "healthy", probe: q })
                last.set(id, `healthy: ${shown(q)}`)
              })
          )
          return again.size === ids.length
        },
        { timeoutMs: LEASE_MS + 15_000, everyMs: 100, reason: "every id placed again" }
      ).catch((error: Error) => {
        throw new Error(`${error.message}; last answers: ${JSON.stringify(Object.fromEntries(last))}`)
      })

      expectNone(
        "ids placed again at an epoch not above the one before the wipe",
        ids.flatMap((id) => {
          const { via, probe: p } = again.get(id)!
          const [before, after] = [epochOf(placed.get(id)!), epochOf(p)]
          return after > before ? [] : [`${id}: ${before} before the wipe, ${after} after (placed through the ${via} replica)`]
        })
      )
      expectNone(
        "ids placed again through the slow replica",
        ids.flatMap((id) => (again.get(id)!.via === "slow" ? [id] : []))
      )
    })
  }, scaled(60_000))
})
