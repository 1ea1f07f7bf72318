// Model-based test of the view-based placement when the membership view is stale: the Redis
// layer ranks a new placement from Pinboard's view of the bucket (src/registry/MembershipView.ts)
// and resolve.lua only checks the proposal at `now`. A test seam holds the views still while the
// membership changes under them; whatever a stale view proposes, a new placement must go to a
// worker the reference model counts as a candidate at `now`, never beside a live owner, and as
// soon as the view is let go, the choice must again be exactly the model's.
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { bucketOf } from "../../src/contract/Bucket.js"
import type { RegistryBackend } from "../../src/registry/RegistryBackend.js"
import { minLeaseLeftMs, rowKey, type RegistryPolicy, type ResolveOutcome, type ResolveQuery } from "../../src/registry/Domain.js"
import { propose } from "../../src/registry/MembershipView.js"
import { makeMemoryBackend, type MemoryBackend } from "../../src/registry/Memory.js"
import type { BucketState } from "../../src/registry/BucketState.js"
import { makeRedisBackend } from "../../src/registry/Redis.js"
import { makeRedisViews, type RedisViews } from "../../src/registry/RedisView.js"
import { modelCandidates, modelChoice } from "../support/ModelPlacement.js"
import { useRedis } from "../support/RedisBackend.js"
import { scaled } from "../support/Time.js"
import * as Gen from "../support/Arbitraries.js"

const BUCKETS = 3
const policy: RegistryPolicy = { leaseMs: 3000, balanceFactor: 1.25, nackThreshold: 2, nackWindowMs: 3000 }
const WORKERS = ["w-a", "w-b", "w-c", "w-d"]
const NAMESPACES = ["/n1", "/n2"]
/** Repeated ids (rows matter: the one-live-owner check bites); fresh ids are made per run. */
const IDS = ["x", "y", "z", "q"]
const HEADROOMS = [0, 1, 1.5, 2.5, 4, 6, 10, 0.1 + 0.2, 7, 40]

/**
 * How a held view misses changes. "frozen": no answer reaches it, not even a refused proposal's,
 * so the re-rank proposes from the same stale view. "lagging": it misses what each resolve's first
 * answer carries (as when the membership changes between that answer and the proposal's check),
 * but a refused proposal's answer catches it up, as in production.
 */
type HoldMode = "frozen" | "lagging"

/** The views of one Redis backend, held still on demand (the `makeViews` test seam of makeRedisBackend). */
interface HoldableViews {
  held: HoldMode | undefined
  /** Answers absorbed since `mark()`: 2 means the first proposal was refused (or the view had none) and a second was asked for. */
  absorbs: number
  readonly mark: () => void
  readonly views: () => RedisViews
  readonly makeViews: typeof makeRedisViews
}

const holdableViews = (): HoldableViews => {
  let inner: RedisViews | undefined
  const control: HoldableViews = {
    held: undefined,
    absorbs: 0,
    mark: () => {
      control.absorbs = 0
    },
    views: () => inner!,
    makeViews: (buckets, read, minLeaseLeft) => {
      const real = makeRedisViews(buckets, read, minLeaseLeft)
      inner = real
      return {
        view: real.view,
        absorb: (bucket, now, payload) => {
          control.absorbs += 1
          const caughtUp = control.held === undefined || (control.held === "lagging" && control.absorbs > 1)
          if (caughtUp) {
            // A view that had read the bucket, now behind a trimmed log: it reads the bucket afresh, page by page.
            if (payload.state === "full" && real.view(bucket).gen !== "") coverage.fullReads += 1
            return real.absorb(bucket, now, payload)
          }
          // Held: the view stays as it was. The short list is the script's, at `now`: always current.
          return Promise.resolve(new Set(payload.short ?? []))
        }
      }
    }
  }
  return control
}

type Resolve = {
  readonly op: "resolve"
  readonly namespace: string
  /** undefined: a fresh id, never resolved before. */
  readonly id: string | undefined
  readonly affinity: string
  readonly caller: string | undefined
  readonly excluded: ReadonlyArray<string>
  readonly r1: number
  readonly r2: number
}

type Cmd =
  | { readonly op: "register"; readonly worker: string; readonly namespaces: ReadonlyArray<string>; readonly headroom: number; readonly draining: boolean }
  | { readonly op: "heartbeat"; readonly worker: string; readonly stale: boolean; readonly headroom: number; readonly draining: boolean; readonly degraded: boolean }
  | { readonly op: "deregister"; readonly worker: string; readonly stale: boolean }
  | { readonly op: "nack"; readonly worker: string }
  | { readonly op: "advance"; readonly ms: number }
  | { readonly op: "sweep" | "workers" | "release" }
  | { readonly op: "hold"; readonly mode: HoldMode }
  | Resolve
  | { readonly op: "burst"; readonly resolves: ReadonlyArray<Resolve> }

/** A registered fleet past its cold start, then one fresh resolve per bucket so that every view has read the bucket. */
const FLEET: ReadonlyArray<Cmd> = [
  { op: "register", worker: "w-a", namespaces: ["/n1", "/n2"], headroom: 1, draining: false },
  { op: "register", worker: "w-b", namespaces: ["/n1"], headroom: 2.5, draining: false },
  { op: "register", worker: "w-c", namespaces: ["/n1", "/n2"], headroom: 0.1 + 0.2, draining: false },
  { op: "advance", ms: 1600 },
  ...["w-a", "w-b", "w-c"].map((worker): Cmd => ({ op: "heartbeat", worker, stale: false, headroom: 1, draining: false, degraded: false })),
  { op: "advance", ms: 1500 },
  ...[["w-a", 0], ["w-b", 5], ["w-c", 0.3]].map(([worker, headroom]): Cmd => ({ op: "heartbeat", worker: worker as string, stale: false, headroom: headroom as number, draining: false, degraded: false })),
  ...[0, 1, 2, 3, 4, 5].map((r): Cmd => ({ op: "resolve", namespace: NAMESPACES[r % 2]!, id: undefined, affinity: `warm${r}`, caller: undefined, excluded: [], r1: 0.5, r2: 0.5 }))
]

const worker = Gen.constantFrom(...WORKERS)
const namespace = Gen.constantFrom(...NAMESPACES)
const rarely = Gen.constantFrom(false, false, false, false, true)
const unit = Gen.double({ min: 0, max: 1, maxExcluded: true })
const resolveCommand: Gen.Arbitrary<Resolve> = Gen.record({
  op: Gen.constant("resolve" as const),
  namespace,
  // Mostly fresh ids (the choice is compared with the model's), else a few repeated ones.
  id: Gen.option(Gen.constantFrom(...IDS), { nil: undefined, freq: 2 }),
  affinity: Gen.constantFrom("10.0.0.1", "10.0.0.2", "10.0.0.3", "::1", ""),
  caller: Gen.option(worker, { nil: undefined, freq: 3 }),
  excluded: Gen.subarray(WORKERS, { maxLength: 1 }),
  r1: unit,
  r2: unit
})
const command: Gen.Arbitrary<Cmd> = Gen.oneof(
  { arbitrary: resolveCommand, weight: 6 },
  // Several resolves in a row: a stale view ranks them all before anything else changes.
  { arbitrary: Gen.record({ op: Gen.constant("burst" as const), resolves: Gen.array(resolveCommand, { minLength: 2, maxLength: 6 }) }), weight: 3 },
  { arbitrary: Gen.record({ op: Gen.constant("register" as const), worker, namespaces: Gen.subarray(NAMESPACES, { minLength: 1 }), headroom: Gen.constantFrom(...HEADROOMS), draining: rarely }), weight: 3 },
  { arbitrary: Gen.record({ op: Gen.constant("heartbeat" as const), worker, stale: rarely, headroom: Gen.constantFrom(...HEADROOMS), draining: rarely, degraded: rarely }), weight: 8 },
  { arbitrary: Gen.record({ op: Gen.constant("deregister" as const), worker, stale: rarely }), weight: 2 },
  Gen.record({ op: Gen.constant("nack" as const), worker }),
  { arbitrary: Gen.record({ op: Gen.constant("advance" as const), ms: Gen.constantFrom(1, 200, 500, 999, 1000, 2000, 3000, 6001) }), weight: 3 },
  // Sweeps often enough that the change log is trimmed behind a held view (it then reads the bucket afresh).
  { arbitrary: Gen.record({ op: Gen.constant("sweep" as const) }), weight: 2 },
  Gen.record({ op: Gen.constant("workers" as const) }),
  { arbitrary: Gen.record({ op: Gen.constant("hold" as const), mode: Gen.constantFrom<HoldMode>("frozen", "lagging") }), weight: 2 },
  Gen.record({ op: Gen.constant("release" as const) })
)

const run = <A>(effect: Effect.Effect<A, unknown>) => Effect.runPromise(effect)

/** What the runs covered, printed once at the end of the file. */
const coverage = {
  freshResolves: 0,
  heldResolves: 0,
  /** Held resolves placed on another worker than the model's choice. */
  heldDiffered: 0,
  /** Held resolves that answered NoLiveBackends while the model had a candidate. */
  heldMissed: 0,
  /** Held resolves whose first proposal was not placed, so a second was asked for. */
  heldReRanked: 0,
  /** ... of which the second proposal was placed. */
  heldReRankPlaced: 0,
  repeatedIdForwarded: 0,
  repeatedIdReplaced: 0,
  refreshesAfterRelease: 0,
  /** Answers that sent a view behind a trimmed log to read the bucket afresh (view.lua "members"). */
  fullReads: 0
}

/** One run: the reference and Redis side by side, Redis's own placements tracked per id. */
class Run {
  readonly memory: MemoryBackend
  readonly redis: RegistryBackend
  readonly hold = holdableViews()
  readonly incarnations = new Map<string, string>()
  /** rowKey -> Redis's last placement of the id. */
  readonly placements = new Map<string, { worker: string; epoch: string; incarnation: string }>()
  serial = 0
  fresh = 0
  now = 1_700_000_000_000

  constructor(client: Parameters<typeof makeRedisBackend>[0], prefix: string) {
    this.memory = makeMemoryBackend(BUCKETS, policy)
    this.redis = makeRedisBackend(client, { prefix, buckets: BUCKETS, policy, makeViews: this.hold.makeViews })
  }

  /** A membership command on both layers; their answers must be equal. */
  async membership(cmd: Exclude<Cmd, Resolve | { op: "burst" | "hold" | "release" | "advance" }>): Promise<void> {
    const incarnation = `inc${this.serial++}`
    const on = async (backend: RegistryBackend): Promise<unknown> => {
      switch (cmd.op) {
        case "register":
          return run(backend.register(this.now, { worker: cmd.worker, incarnation, advertiseUrl: `http://127.0.0.1:1/${cmd.worker}`, namespaces: cmd.namespaces.map((ns) => ({ namespace: ns, hostname: "", env: "" })), headroom: cmd.headroom, draining: cmd.draining, callerKey: undefined }))
        case "heartbeat": {
          const answers = await run(backend.heartbeat(this.now, { worker: cmd.worker, incarnation: cmd.stale ? "stale" : this.incarnations.get(cmd.worker) ?? "none", headroom: cmd.headroom, draining: cmd.draining, degraded: cmd.degraded }))
          // The wind-down lists are not compared: the reference holds no rows here (resolves run on Redis only).
          return { reached: answers.reached.map(([b, a]) => [b, a._tag]), unreached: answers.unreached }
        }
        case "deregister":
          return run(backend.deregister(this.now, cmd.worker, cmd.stale ? "stale" : this.incarnations.get(cmd.worker) ?? "none"))
        case "nack":
          return run(backend.nack(this.now, cmd.worker))
        case "sweep":
          return run(backend.sweep(this.now))
        case "workers":
          return run(backend.workers(this.now, "", 1000))
      }
    }
    const expected = await on(this.memory)
    const actual = await on(this.redis)
    expect(actual, `${cmd.op} at ${this.now}: ${JSON.stringify(cmd)}`).toEqual(expected)
    if (cmd.op === "register") this.incarnations.set(cmd.worker, incarnation)
  }

  queryOf(cmd: Resolve): ResolveQuery {
    const id = cmd.id ?? `fresh${this.fresh++}`
    return { env: "", namespace: cmd.namespace, id, hostname: "", takeover: "wind_down", caller: cmd.caller, affinity: cmd.affinity, excluded: cmd.excluded, r1: cmd.r1, r2: cmd.r2 }
  }

  /** The workers short of lease at `now` per the reference (what the script's lease index answers). */
  shortAt(state: Readonly<BucketState>): Set<string> {
    const min = minLeaseLeftMs(policy.leaseMs)
    return new Set([...state.workers.values()].filter((w) => w.leaseExpiresAt - this.now < min).map((w) => w.worker))
  }

  /** A resolve on Redis, held to the reference membership at `now`. */
  async resolve(cmd: Resolve, afterRelease: boolean): Promise<void> {
    const query = this.queryOf(cmd)
    const now = this.now
    const bucket = bucketOf("", query.namespace, query.id, BUCKETS)
    const key = rowKey(query)
    const state = this.memory.inspect(bucket)
    const candidates = modelCandidates(state, query, now, policy)
    const expected = modelChoice(candidates, query, policy)
    const previous = this.placements.get(key)
    const owner = previous && state.workers.get(previous.worker)
    const previousLive = owner !== undefined && owner.incarnation === previous!.incarnation && owner.leaseExpiresAt > now
    const held = this.hold.held
    // What the held view proposes first (the same ranking code, over the stale records).
    const heldProposal = held === undefined ? undefined : propose(this.hold.views().view(bucket), query, now, this.shortAt(state), policy)
    const seqBefore = this.hold.views().view(bucket).seq

    this.hold.mark()
    const answer: ResolveOutcome = await run(this.redis.resolve(bucket, now, query))
    const absorbs = this.hold.absorbs
    const where = `resolve at ${now} (${held ?? "fresh"} view, ${absorbs} answers absorbed): ${JSON.stringify(query)} -> ${JSON.stringify(answer)}; candidates ${JSON.stringify(candidates)}, model ${expected}, previous ${JSON.stringify(previous)} live ${previousLive}, held proposal ${heldProposal}`

    if (previousLive) {
      // A live row is forwarded, whatever the view says.
      expect(answer, where).toMatchObject({ _tag: "Placed", isNew: false, worker: previous!.worker, epoch: previous!.epoch })
      coverage.repeatedIdForwarded += 1
      return
    }
    if (held === undefined) coverage.freshResolves += 1
    else coverage.heldResolves += 1
    if (afterRelease && this.hold.views().view(bucket).seq !== seqBefore) coverage.refreshesAfterRelease += 1

    if (answer._tag === "Placed") {
      // No two live owners: a new placement only where none is live (its previous owner's record
      // gone, another incarnation, or lease over).
      expect(answer.isNew, where).toBe(true)
      // Whatever view proposed it: a candidate at `now` per the reference membership.
      expect(candidates.map((c) => c.worker), where).toContain(answer.worker)
      // Epochs strictly increase per id.
      if (previous !== undefined) expect(BigInt(answer.epoch) > BigInt(previous.epoch), where).toBe(true)
      if (previous !== undefined) coverage.repeatedIdReplaced += 1
      this.placements.set(key, { worker: answer.worker, epoch: answer.epoch, incarnation: state.workers.get(answer.worker)!.incarnation })
    } else {
      expect(answer._tag, where).toBe("NoLiveBackends")
    }
    const placed = answer._tag === "Placed" ? answer.worker : undefined

    if (held === undefined) {
      // A fresh view (also right after a release: the first answer catches it up) ranks exactly as the model,
      // and its proposal is never refused.
      expect(placed, where).toBe(expected)
      expect(absorbs, where).toBeLessThanOrEqual(1)
      return
    }
    // Held. A stale view may rank another candidate first, or miss a new worker altogether, so
    // NoLiveBackends is allowed while the model has a candidate. What happens is still exact:
    // the held proposal is placed when it is a candidate at `now`; otherwise a frozen view
    // proposes the same again (refused: NoLiveBackends) and a lagging one catches up and
    // places the model's choice.
    const accepted = heldProposal !== "" && candidates.some((c) => c.worker === heldProposal)
    expect(placed, where).toBe(accepted ? heldProposal : held === "frozen" ? undefined : expected)
    if (placed !== expected) {
      if (placed === undefined) coverage.heldMissed += 1
      else coverage.heldDiffered += 1
    }
    if (absorbs > 1) {
      coverage.heldReRanked += 1
      if (placed !== undefined) coverage.heldReRankPlaced += 1
    }
  }

  async step(cmd: Cmd, afterRelease: boolean): Promise<void> {
    this.now += 1
    switch (cmd.op) {
      case "advance":
        this.now += cmd.ms
        return
      case "hold":
        this.hold.held = cmd.mode
        return
      case "release":
        this.hold.held = undefined
        return
      case "resolve":
        return this.resolve(cmd, afterRelease)
      case "burst":
        for (const [i, resolve] of cmd.resolves.entries()) await this.resolve(resolve, afterRelease && i === 0)
        return
      default:
        return this.membership(cmd)
    }
  }
}

describe("registry: view-based placement with a stale membership view (one redis-server)", () => {
  const live = useRedis()
  let runs = 0

  afterAll(() => {
    console.log(`stale-view coverage: ${JSON.stringify(coverage)}`)
  })

  it("places only on candidates, never beside a live owner, and exactly as the model once the view is fresh", async () => {
    await Gen.assertProperty(
      Gen.array(command, { minLength: 10, maxLength: 70 }),
      async (random) => {
        const r = new Run(live.client, `s${runs++}`)
        let afterRelease = false
        for (const cmd of [...FLEET, ...random]) {
          const wasHeld = r.hold.held !== undefined
          await r.step(cmd, afterRelease)
          if (cmd.op === "release") afterRelease = wasHeld
          else if (cmd.op === "resolve" || cmd.op === "burst") afterRelease = false
        }
      },
      { runs: 200 }
    )
    // The runs must have exercised staleness, or the property says nothing about it.
    expect(coverage.heldResolves).toBeGreaterThan(100)
    expect(coverage.heldDiffered).toBeGreaterThan(0)
    expect(coverage.heldMissed).toBeGreaterThan(0)
    expect(coverage.heldReRankPlaced).toBeGreaterThan(0)
  }, scaled(120_000))

  it("a stale view's refused proposal is re-ranked; a held view misses a new worker; a release catches up", async () => {
    const r = new Run(live.client, `example${runs++}`)
    for (const cmd of FLEET) await r.step(cmd, false)
    // Fresh ids of one bucket: one view throughout.
    const bucket = 0
    const resolveFresh = async (caller?: string) => {
      let query: ResolveQuery
      do query = r.queryOf({ op: "resolve", namespace: "/n1", id: undefined, affinity: "10.0.0.9", caller, excluded: [], r1: 0.25, r2: 0.75 })
      while (bucketOf("", query.namespace, query.id, BUCKETS) !== bucket)
      const state = r.memory.inspect(bucket)
      const wouldPropose = propose(r.hold.views().view(bucket), query, r.now, r.shortAt(state), policy)
      r.hold.mark()
      const answer = await run(r.redis.resolve(bucket, r.now, query))
      return { answer, wouldPropose, model: modelChoice(modelCandidates(state, query, r.now, policy), query, policy), absorbs: r.hold.absorbs }
    }

    // Held (a refused proposal's answer still catches the view up); the view would choose w-b (caller).
    r.hold.held = "lagging"
    r.now += 1
    const before = await resolveFresh("w-b")
    expect(before.answer).toMatchObject({ _tag: "Placed", worker: "w-b", isNew: true })
    await r.step({ op: "deregister", worker: "w-b", stale: false }, false)
    const refused = await resolveFresh("w-b")
    expect(refused.wouldPropose).toBe("w-b")
    // The script refused w-b (gone); the re-rank from the refreshed view placed the model's choice.
    expect(refused.absorbs).toBe(2)
    expect(refused.answer).toMatchObject({ _tag: "Placed", isNew: true })
    expect((refused.answer as { worker: string }).worker).not.toBe("w-b")
    expect((refused.answer as { worker: string }).worker).toBe(refused.model)

    // A new worker with a big headroom while held: the held view does not know it, so it proposes an old candidate.
    await r.step({ op: "register", worker: "w-d", namespaces: ["/n1"], headroom: 40, draining: false }, false)
    const missed = await resolveFresh("w-d")
    expect(missed.model).toBe("w-d")
    expect(missed.absorbs).toBe(1)
    expect(missed.answer).toMatchObject({ _tag: "Placed", isNew: true })
    expect((missed.answer as { worker: string }).worker).not.toBe("w-d")

    // Released: the next fresh id's first answer catches the view up, and the choice is the model's.
    r.hold.held = undefined
    r.now += 1
    const caughtUp = await resolveFresh("w-d")
    expect(caughtUp.answer).toMatchObject({ _tag: "Placed", worker: "w-d", isNew: true })
    expect(caughtUp.model).toBe("w-d")

    // Frozen (no answer reaches the view): a gone worker is proposed twice, and NoLiveBackends
    // answers although the model has candidates.
    r.hold.held = "frozen"
    r.now += 1
    await r.step({ op: "deregister", worker: "w-d", stale: false }, false)
    const frozen = await resolveFresh("w-d")
    expect(frozen.wouldPropose).toBe("w-d")
    expect(frozen.absorbs).toBe(2)
    expect(frozen.answer).toEqual({ _tag: "NoLiveBackends" })
    expect(frozen.model).toBeDefined()
    r.hold.held = undefined
    r.now += 1
    const afterFrozen = await resolveFresh("w-d")
    expect(afterFrozen.answer).toMatchObject({ _tag: "Placed", worker: afterFrozen.model, isNew: true })

    // Held past the change log's trim (a removed worker's entry goes a lease after its removal):
    // the first answer after the release sends the view to read the bucket afresh.
    r.hold.held = "frozen"
    await r.step({ op: "deregister", worker: "w-c", stale: false }, false)
    for (const ms of [0, 1500, 1600]) {
      await r.step({ op: "advance", ms }, false)
      await r.step({ op: "heartbeat", worker: "w-a", stale: false, headroom: 1, draining: false, degraded: false }, false)
    }
    await r.step({ op: "sweep" }, false)
    r.hold.held = undefined
    r.now += 1
    const reads = coverage.fullReads
    const afterTrim = await resolveFresh()
    expect(coverage.fullReads).toBe(reads + 1)
    expect(afterTrim.model).toBe("w-a")
    expect(afterTrim.answer).toMatchObject({ _tag: "Placed", worker: "w-a", isNew: true })
  })
})
