// Model-based test: random operation sequences run against the embedded registry and a real
// Redis side by side (one redis-server, and a local Redis Cluster of three shards). Every
// answer must be equal, every resolve must answer what a second, naive resolution written from
// docs/protocol.md "Resolution" derives (test/support/NaiveResolution.ts), and the invariants
// of docs/protocol.md and docs/registry-api.md must hold throughout.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type { Takeover } from "../../src/Config.js"
import type { RegistryBackend } from "../../src/registry/RegistryBackend.js"
import { bucketOf } from "../../src/contract/Bucket.js"
import { rowKey, type CallerPlacement, type CasOutcome, type OwnerGrant, type PlacementKey, type PlacementRow, type RegistryPolicy } from "../../src/registry/Domain.js"
import { makeMemoryBackend, type MemoryBackend } from "../../src/registry/Memory.js"
import { bindingKey } from "../../src/registry/Hostnames.js"
import { naiveResolve, type NaiveAnswer } from "../support/NaiveResolution.js"
import { redisBackend, useRedis, useRedisCluster, wipeBucket } from "../support/RedisBackend.js"
import * as Gen from "../support/Arbitraries.js"

const BUCKETS = 3
const policy: RegistryPolicy = { leaseMs: 3000, balanceFactor: 1.25, nackThreshold: 2, nackWindowMs: 3000 }
const WORKERS = ["w-a", "w-b", "w-c", "w-d"]
const NAMESPACES = ["/n1", "/n2"]
const IDS = ["x", "y", "z", "q", "r"]
/** Hostname-aware runs: two hostnames, two envs, registration epochs (docs/registry-api.md). */
const HOSTS = ["a.example", "b.example"]
const ENVS = ["prod", "dev"]
const EPOCHS = ["0", "1", "2", "5"]
const HEADROOMS = [0, 1, 1.5, 2.5, 4, 6, 10, 0.1 + 0.2, 1e-9, 7]
/** Caller keys: longer than any tag drawn, so that no answer holds one by chance. */
const CALLER_KEYS = ["callerKey-1", "callerKey-2"]

type Cmd =
  | { readonly op: "register"; readonly worker: string; readonly namespaces: ReadonlyArray<string>; readonly headroom: number; readonly draining: boolean; readonly hosts?: ReadonlyArray<readonly [string, string]>; readonly epoch?: string; readonly callerKey?: string | undefined }
  | { readonly op: "heartbeat"; readonly worker: string; readonly stale: boolean; readonly headroom: number; readonly draining: boolean; readonly degraded: boolean; readonly rejoin?: true }
  | { readonly op: "deregister"; readonly worker: string; readonly stale: boolean }
  | { readonly op: "resolve"; readonly namespace: string; readonly id: string; readonly affinity: string; readonly caller: string | undefined; readonly excluded: ReadonlyArray<string>; readonly r1: number; readonly r2: number; readonly hostname?: string; readonly env?: string; readonly takeover?: Takeover }
  | { readonly op: "release" | "windDown"; readonly namespace: string; readonly id: string; readonly stale: boolean; readonly env?: string; readonly owners?: OwnerGrant | undefined }
  | { readonly op: "tag"; readonly namespace: string; readonly id: string; readonly stale: boolean; readonly tag: string; readonly env?: string; readonly owners?: OwnerGrant | undefined }
  | { readonly op: "nack"; readonly worker: string }
  | { readonly op: "advance"; readonly ms: number }
  /** Time passes, then every registered worker heartbeats, as a live fleet does: long runs keep their leases. */
  | { readonly op: "beat"; readonly ms: number; readonly headroom: number }
  | { readonly op: "wipe"; readonly bucket: number }
  | { readonly op: "sweep" | "workers" }
  | { readonly op: "placement"; readonly namespace: string; readonly id: string; readonly env?: string }
  | { readonly op: "callerPlacement"; readonly namespace: string; readonly id: string; readonly worker: string; readonly env?: string }
  | { readonly op: "resolveMany"; readonly resolves: ReadonlyArray<Extract<Cmd, { op: "resolve" }>> }

/** Most runs start from a registered fleet past its cold start. */
const FLEET: ReadonlyArray<Cmd> = [
  { op: "register", worker: "w-a", namespaces: ["/n1", "/n2"], headroom: 1, draining: false },
  { op: "register", worker: "w-b", namespaces: ["/n1"], headroom: 2.5, draining: false },
  { op: "register", worker: "w-c", namespaces: ["/n1", "/n2"], headroom: 0.1 + 0.2, draining: false },
  { op: "advance", ms: 1600 },
  ...["w-a", "w-b", "w-c"].map((worker): Cmd => ({ op: "heartbeat", worker, stale: false, headroom: 1, draining: false, degraded: false })),
  { op: "advance", ms: 1500 },
  ...[["w-a", 0], ["w-b", 5], ["w-c", 0.3]].map(([worker, headroom]): Cmd => ({ op: "heartbeat", worker: worker as string, stale: false, headroom: headroom as number, draining: false, degraded: false }))
]

const worker = Gen.constantFrom(...WORKERS)
const namespace = Gen.constantFrom(...NAMESPACES)
const id = Gen.constantFrom(...IDS)
const rarely = Gen.constantFrom(false, false, false, false, true)
const unit = Gen.double({ min: 0, max: 1, maxExcluded: true })
const beat = Gen.record({ op: Gen.constant("beat" as const), ms: Gen.integer({ min: 300, max: 1500 }), headroom: Gen.constantFrom(...HEADROOMS) })
/** A worker credential's grant, or none (the operator's call): exact ids and prefixes, a prefix longer than an id included. */
const owners = Gen.option(Gen.record({ exact: Gen.subarray(WORKERS, { maxLength: 2 }), prefixes: Gen.subarray(["w-", "w-a", "w-b", "", "w-ab", "x-"], { maxLength: 2 }) }), { nil: undefined })
const callerKey = Gen.option(Gen.constantFrom(...CALLER_KEYS), { nil: undefined })
const resolveCommand = Gen.record({ op: Gen.constant("resolve" as const), namespace, id, affinity: Gen.constantFrom("10.0.0.1", "10.0.0.2", "::1", ""), caller: Gen.option(worker, { nil: undefined }), excluded: Gen.subarray(WORKERS, { maxLength: 2 }), r1: unit, r2: unit })
const command: Gen.Arbitrary<Cmd> = Gen.oneof(
  { arbitrary: resolveCommand, weight: 8 },
  // Concurrent resolves: the Redis layer batches them per bucket; answers must equal running them in order.
  { arbitrary: Gen.record({ op: Gen.constant("resolveMany" as const), resolves: Gen.array(resolveCommand, { minLength: 2, maxLength: 8 }) }), weight: 2 },
  Gen.record({ op: Gen.constant("register" as const), worker, namespaces: Gen.subarray(NAMESPACES, { minLength: 1 }), headroom: Gen.constantFrom(...HEADROOMS), draining: rarely, callerKey }),
  { arbitrary: Gen.record({ op: Gen.constant("heartbeat" as const), worker, stale: rarely, headroom: Gen.constantFrom(...HEADROOMS), draining: rarely, degraded: rarely }), weight: 8 },
  Gen.record({ op: Gen.constant("deregister" as const), worker, stale: Gen.boolean() }),
  Gen.record({ op: Gen.constant("windDown" as const), namespace, id, stale: Gen.boolean() }),
  Gen.record({ op: Gen.constant("release" as const), namespace, id, stale: Gen.boolean(), owners }),
  Gen.record({ op: Gen.constant("tag" as const), namespace, id, stale: Gen.boolean(), tag: Gen.string({ maxLength: 8 }), owners }),
  Gen.record({ op: Gen.constant("nack" as const), worker }),
  { arbitrary: Gen.record({ op: Gen.constant("advance" as const), ms: Gen.constantFrom(1, 200, 500, 999, 1000, 1999, 2000, 3000, 6001) }), weight: 4 },
  { arbitrary: beat, weight: 6 },
  { arbitrary: Gen.record({ op: Gen.constant("wipe" as const), bucket: Gen.integer({ min: 0, max: BUCKETS - 1 }) }), weight: 1 },
  Gen.record({ op: Gen.constantFrom("sweep" as const, "workers" as const) }),
  Gen.record({ op: Gen.constant("placement" as const), namespace, id }),
  Gen.record({ op: Gen.constant("callerPlacement" as const), namespace, id, worker })
)

/** Hostname-aware runs: registrations name (hostname, env) per namespace with an epoch; resolves come through a hostname. */
const host = Gen.constantFrom(...HOSTS)
const env = Gen.constantFrom(...ENVS)
const hostnameResolve = Gen.record({
  op: Gen.constant("resolve" as const), namespace, id, affinity: Gen.constantFrom("10.0.0.1", "10.0.0.2"), caller: Gen.option(worker, { nil: undefined }),
  excluded: Gen.subarray(WORKERS, { maxLength: 2 }), r1: unit, r2: unit, hostname: host, env, takeover: Gen.constantFrom("wind_down" as const, "deny" as const)
})
const hostnameCommand: Gen.Arbitrary<Cmd> = Gen.oneof(
  { arbitrary: hostnameResolve, weight: 8 },
  { arbitrary: Gen.record({ op: Gen.constant("resolveMany" as const), resolves: Gen.array(hostnameResolve, { minLength: 2, maxLength: 6 }) }), weight: 2 },
  { arbitrary: Gen.record({ op: Gen.constant("register" as const), worker, namespaces: Gen.subarray(NAMESPACES, { minLength: 1 }), headroom: Gen.constantFrom(...HEADROOMS), draining: rarely, hosts: Gen.array(Gen.tuple(host, env), { minLength: 1, maxLength: 2 }), epoch: Gen.constantFrom(...EPOCHS), callerKey }), weight: 2 },
  { arbitrary: Gen.record({ op: Gen.constant("heartbeat" as const), worker, stale: rarely, headroom: Gen.constantFrom(...HEADROOMS), draining: rarely, degraded: rarely }), weight: 8 },
  Gen.record({ op: Gen.constant("deregister" as const), worker, stale: Gen.boolean() }),
  Gen.record({ op: Gen.constant("windDown" as const), namespace, id, stale: Gen.boolean(), env }),
  Gen.record({ op: Gen.constant("release" as const), namespace, id, stale: Gen.boolean(), env, owners }),
  Gen.record({ op: Gen.constant("tag" as const), namespace, id, stale: Gen.boolean(), tag: Gen.string({ maxLength: 8 }), env, owners }),
  { arbitrary: Gen.record({ op: Gen.constant("advance" as const), ms: Gen.constantFrom(1, 500, 1000, 2000, 3000, 6001) }), weight: 4 },
  { arbitrary: beat, weight: 6 },
  { arbitrary: Gen.record({ op: Gen.constant("wipe" as const), bucket: Gen.integer({ min: 0, max: BUCKETS - 1 }) }), weight: 1 },
  Gen.record({ op: Gen.constantFrom("sweep" as const, "workers" as const) }),
  Gen.record({ op: Gen.constant("placement" as const), namespace, id, env }),
  Gen.record({ op: Gen.constant("callerPlacement" as const), namespace, id, worker, env })
)

/** A hostname-aware fleet past its cold start: both hostnames bound to prod (so takeovers happen), w-d on dev. */
const HOSTNAME_FLEET: ReadonlyArray<Cmd> = [
  { op: "register", worker: "w-a", namespaces: ["/n1", "/n2"], headroom: 1, draining: false, hosts: [["a.example", "prod"]], epoch: "1" },
  { op: "register", worker: "w-b", namespaces: ["/n1", "/n2"], headroom: 2.5, draining: false, hosts: [["b.example", "prod"]], epoch: "1" },
  { op: "register", worker: "w-c", namespaces: ["/n1"], headroom: 1, draining: false, hosts: [["a.example", "prod"], ["b.example", "prod"]], epoch: "1" },
  { op: "advance", ms: 1600 },
  ...["w-a", "w-b", "w-c"].map((worker): Cmd => ({ op: "heartbeat", worker, stale: false, headroom: 1, draining: false, degraded: false })),
  { op: "advance", ms: 1500 },
  ...["w-a", "w-b", "w-c"].map((worker): Cmd => ({ op: "heartbeat", worker, stale: false, headroom: 1, draining: false, degraded: false }))
]

/** The registrations of a register command: per namespace, plain or one per (hostname, env). */
const registrationsOf = (cmd: Extract<Cmd, { op: "register" }>) =>
  cmd.namespaces.flatMap((ns) => (cmd.hosts === undefined ? [{ namespace: ns, hostname: "", env: "" }] : cmd.hosts.map(([hostname, e]) => ({ namespace: ns, hostname, env: e }))))

/** What the test knows from earlier answers: incarnations and epochs it was told. */
interface Knowledge {
  readonly incarnations: Map<string, string>
  /** Each worker's last registration, which it repeats after a 410 in a beat. */
  readonly registrations: Map<string, Cmd>
  readonly epochs: Map<string, string>
  readonly maxEpoch: Map<string, bigint>
  /** The caller key each incarnation was registered with. */
  readonly callerKeys: Map<string, string | undefined>
  serial: number
}

const keyOf = (cmd: { namespace: string; id: string; env?: string }): PlacementKey => ({ env: cmd.env ?? "", namespace: cmd.namespace, id: cmd.id })
const run = <A>(effect: Effect.Effect<A, unknown>) => Effect.runPromise(effect)

const apply = async (backend: RegistryBackend, cmd: Cmd, now: number, known: Knowledge, incarnation: string): Promise<unknown> => {
  switch (cmd.op) {
    case "register":
      return run(backend.register(now, { worker: cmd.worker, incarnation, advertiseUrl: `http://127.0.0.1:1/${cmd.worker}`, namespaces: registrationsOf(cmd), headroom: cmd.headroom, draining: cmd.draining, callerKey: cmd.callerKey, ...(cmd.epoch === undefined ? {} : { epoch: cmd.epoch }) }))
    case "heartbeat": {
      const answers = await run(backend.heartbeat(now, { worker: cmd.worker, incarnation: cmd.stale ? "stale" : known.incarnations.get(cmd.worker) ?? "none", headroom: cmd.headroom, draining: cmd.draining, degraded: cmd.degraded }))
      expect(answers.unreached).toEqual([])
      return answers.reached.map(([, a]) => (a._tag === "Renewed" ? { ...a, windDown: [...a.windDown].sort((x, y) => (rowKey(x) < rowKey(y) ? -1 : 1)) } : a))
    }
    case "deregister":
      return run(backend.deregister(now, cmd.worker, cmd.stale ? "stale" : known.incarnations.get(cmd.worker) ?? "none"))
    case "resolve":
      return run(backend.resolve(bucketOf(cmd.env ?? "", cmd.namespace, cmd.id, BUCKETS), now, { ...keyOf(cmd), hostname: cmd.hostname ?? "", takeover: cmd.takeover ?? "wind_down", caller: cmd.caller, affinity: cmd.affinity, excluded: cmd.excluded, r1: cmd.r1, r2: cmd.r2 }))
    case "release":
    case "windDown":
    case "tag": {
      const bucket = bucketOf(cmd.env ?? "", cmd.namespace, cmd.id, BUCKETS)
      const epoch = cmd.stale ? "1" : known.epochs.get(rowKey(keyOf(cmd))) ?? "1"
      if (cmd.op === "release") return run(backend.release(bucket, now, keyOf(cmd), epoch, cmd.owners))
      if (cmd.op === "tag") return run(backend.tag(bucket, now, keyOf(cmd), epoch, cmd.tag, cmd.owners))
      return run(backend.beginWindDown(bucket, now, keyOf(cmd), epoch))
    }
    case "nack":
      return run(backend.nack(now, cmd.worker))
    case "sweep":
      return run(backend.sweep(now))
    case "workers":
      return run(backend.workers(now, "", 1000))
    case "placement":
      return run(backend.placement(bucketOf(cmd.env ?? "", cmd.namespace, cmd.id, BUCKETS), now, keyOf(cmd)))
    case "callerPlacement":
      return run(backend.callerPlacement(bucketOf(cmd.env ?? "", cmd.namespace, cmd.id, BUCKETS), now, keyOf(cmd), cmd.worker))
    case "resolveMany":
      return Promise.all(cmd.resolves.map((resolve) => apply(backend, resolve, now, known, incarnation)))
    case "advance":
    case "beat":
    case "wipe":
      return undefined
  }
}

/** The answer the naive resolution derives; a new placement's epoch only above the bucket's counter. */
const expectNaive = (answer: unknown, naive: NaiveAnswer, context: string) => {
  if (naive._tag !== "Placed" || !naive.isNew) return expect(answer, context).toEqual(naive)
  const { epochAbove, ...placed } = naive
  const { epoch, ...rest } = answer as { epoch: string }
  expect(rest, context).toEqual(placed)
  expect(BigInt(epoch) > epochAbove, `${context}: epoch ${epoch} not above the counter ${epochAbove}`).toBe(true)
}

/** The invariants of a resolve answer, judged on the embedded bucket's state before the call. */
const checkResolve = (memory: MemoryBackend, cmd: Extract<Cmd, { op: "resolve" }>, now: number, known: Knowledge, answer: unknown, before: { coldSince: number | undefined; liveOwner: { worker: string; epoch: string } | undefined; naive: NaiveAnswer; displacedUntil: number }) => {
  expectNaive(answer, before.naive, `resolve at ${now}: ${JSON.stringify(cmd)}`)
  const outcome = answer as { _tag: string; worker: string; epoch: string; isNew: boolean }
  if (outcome._tag !== "Placed") return
  const key = rowKey(keyOf(cmd))
  const epoch = BigInt(outcome.epoch)
  if (outcome.isNew) {
    // No two live owners: a new placement only where none was live.
    expect(before.liveOwner).toBeUndefined()
    // Epochs strictly increase per id across placements and wipes.
    expect(epoch > (known.maxEpoch.get(key) ?? 0n)).toBe(true)
    // No new placement in cold start, nor for a displaced pair within its lease.
    expect(before.coldSince === undefined || now >= before.coldSince + policy.leaseMs).toBe(true)
    expect(now >= before.displacedUntil).toBe(true)
  } else {
    expect(before.liveOwner).toEqual({ worker: outcome.worker, epoch: outcome.epoch })
  }
  known.maxEpoch.set(key, epoch > (known.maxEpoch.get(key) ?? 0n) ? epoch : known.maxEpoch.get(key)!)
  known.epochs.set(key, outcome.epoch)
  void memory
}

const rowOf = (memory: MemoryBackend, cmd: { namespace: string; id: string; env?: string }) =>
  memory.inspect(bucketOf(cmd.env ?? "", cmd.namespace, cmd.id, BUCKETS)).rows.get(rowKey(keyOf(cmd)))

/**
 * Release and tag with an owner grant: a row of a worker the grant does not cover is refused
 * whatever its epoch, and stays as it was; without a grant, or with no row, never refused.
 */
const checkOwnerCheck = (memory: MemoryBackend, cmd: Extract<Cmd, { op: "tag" }> | Extract<Cmd, { op: "release" | "windDown" }>, before: PlacementRow | undefined, answer: CasOutcome) => {
  const refused = cmd.owners !== undefined && before !== undefined && !cmd.owners.exact.includes(before.worker) && !cmd.owners.prefixes.some((p) => before.worker.startsWith(p))
  expect(answer._tag === "HeldByAnotherWorker", `${cmd.op} of ${before?.worker} with ${JSON.stringify(cmd.owners)}`).toBe(refused)
  if (refused) expect(rowOf(memory, cmd)).toEqual(before)
}

/** A caller's record, when a bucket has one with a key, pairs an incarnation with the key it was registered with. */
const checkCaller = (known: Knowledge, caller: CallerPlacement["caller"]) => {
  if (caller !== undefined) expect(known.callerKeys.get(caller.incarnation)).toBe(caller.callerKey)
}

const snapshotBefore = (memory: MemoryBackend, cmd: Extract<Cmd, { op: "resolve" }>, now: number) => {
  const env = cmd.env ?? ""
  const hostname = cmd.hostname ?? ""
  const state = memory.inspect(bucketOf(env, cmd.namespace, cmd.id, BUCKETS))
  const row = state.rows.get(rowKey(keyOf(cmd)))
  const owner = row && state.workers.get(row.worker)
  const live = row !== undefined && owner !== undefined && owner.incarnation === row.incarnation && owner.leaseExpiresAt > now && (row.windDownAt === 0 || row.windDownAt > now)
  return {
    coldSince: state.coldSince,
    liveOwner: live ? { worker: row.worker, epoch: row.epoch } : undefined,
    displacedUntil: hostname === "" ? 0 : state.bindings.get(bindingKey(hostname, cmd.namespace))?.displacedUntil ?? 0,
    naive: naiveResolve(state, now, { ...keyOf(cmd), hostname, takeover: cmd.takeover ?? "wind_down", caller: cmd.caller, affinity: cmd.affinity, excluded: cmd.excluded, r1: cmd.r1, r2: cmd.r2 }, policy)
  }
}

/**
 * The order in which concurrent resolves take effect on Redis: as given, except that a resolve of
 * an id whose placement an earlier resolve of the batch began (it reached "Resolution" step 5: placed
 * anew, or no live backends) waits for that placement and then asks again ("again" in
 * resolve.lua), after the rest of the batch, in the order of the placements waited for. Yields as it goes: where a resolve waits depends on
 * the earlier answers, which the caller computes between the yields.
 */
function* inSerialOrder(resolves: ReadonlyArray<Extract<Cmd, { op: "resolve" }>>) {
  let pending = resolves.map((resolve, index) => ({ resolve, index }))
  while (pending.length > 0) {
    const waiting: Array<{ readonly entry: (typeof pending)[number]; readonly behind: number }> = []
    /** Row key -> the position (in this round) of the resolve whose placement it began. */
    const placing = new Map<string, number>()
    for (const [position, entry] of pending.entries()) {
      const key = rowKey(keyOf(entry.resolve))
      const behind = placing.get(key)
      if (behind !== undefined) {
        waiting.push({ entry, behind })
        continue
      }
      const answer: { answer?: unknown } = {}
      yield Object.assign(entry, { report: (a: unknown) => (answer.answer = a) })
      const outcome = answer.answer as { _tag: string; isNew?: boolean } | undefined
      if (outcome?._tag === "NoLiveBackends" || (outcome?._tag === "Placed" && outcome.isNew === true)) placing.set(key, position)
    }
    // The waiting ones ask again as the placements they wait for end: in the order those began.
    pending = waiting.sort((a, b) => a.behind - b.behind).map(({ entry }) => entry)
  }
}

const MODES = [
  { mode: "plain", fleet: FLEET, commands: command },
  { mode: "hostname-aware", fleet: HOSTNAME_FLEET, commands: hostnameCommand }
] as const

/**
 * How far the runs reach. `npm run test:deep` (PINBOARD_DEEP=1, not in CI): 1,000 sequences of 50
 * to 400 steps per layer and mode. CI: 75 of 20 to 100, about the steps of the 300 short runs
 * before. `size: "max"` draws lengths over the whole range (fast-check's default size kept
 * arrays near 20 whatever maxLength said; test/support/Arbitraries.ts keeps that default).
 */
const DEEP = process.env.PINBOARD_DEEP === "1"
const REACH = DEEP ? { numRuns: 1000, minLength: 50, maxLength: 400 } : { numRuns: 75, minLength: 20, maxLength: 100 }

/** What a layer and mode's runs covered: sequence lengths and the answers seen, printed after them. */
const coverage = () => {
  const lengths: Array<number> = []
  const outcomes = new Map<string, number>()
  const count = (answer: unknown) => {
    const tag = (answer as { _tag?: string } | undefined)?._tag
    if (tag === undefined) return
    const name = tag === "Placed" ? ((answer as { isNew: boolean }).isNew ? "Placed (new)" : "Placed (forwarded)") : tag
    outcomes.set(name, (outcomes.get(name) ?? 0) + 1)
  }
  const print = (title: string) => {
    if (lengths.length === 0) return
    const sorted = [...lengths].sort((a, b) => a - b)
    const mean = Math.round(sorted.reduce((a, b) => a + b, 0) / sorted.length)
    const byBand = [50, 100, 200, 400].map((bound, i, all) => `${i === 0 ? 0 : all[i - 1]! + 1}-${bound}: ${sorted.filter((n) => n <= bound && (i === 0 || n > all[i - 1]!)).length}`)
    console.log(
      `${title}: ${sorted.length} sequences, steps min ${sorted[0]} mean ${mean} max ${sorted.at(-1)} (${byBand.join(", ")}); answers: ` +
        [...outcomes].sort((a, b) => b[1] - a[1]).map(([name, n]) => `${name} ${n}`).join(", ")
    )
  }
  return { lengths, count, print }
}

describe.each([
  { layer: "one redis-server", connect: useRedis },
  { layer: "a Redis Cluster", connect: useRedisCluster }
])("registry model: embedded vs $layer", ({ layer, connect }) => {
  const live = connect()
  let runs = 0

  it.each(MODES)("answers equally at every step and keeps the invariants ($mode)", async ({ mode, fleet: warm, commands }) => {
    const covered = coverage()
    await Gen.assertProperty(
      Gen.tuple(Gen.constantFrom(true, true, true, false), Gen.array(commands, { minLength: REACH.minLength, maxLength: REACH.maxLength, size: "max" })),
      async ([fleet, random]) => {
        const cmds = fleet ? [...warm, ...random] : random
        covered.lengths.push(cmds.length)
        const prefix = `m${runs++}`
        const memory = makeMemoryBackend(BUCKETS, policy)
        const redis = redisBackend(live.client, prefix, BUCKETS, policy)
        const known: Knowledge = { incarnations: new Map(), registrations: new Map(), epochs: new Map(), maxEpoch: new Map(), callerKeys: new Map(), serial: 0 }
        let now = 1_700_000_000_000
        const queue = [...cmds]
        for (let cmd = queue.shift(); cmd !== undefined; cmd = queue.shift()) {
          if (cmd.op === "beat") {
            const beats = [...known.incarnations.keys()].map((worker): Cmd => ({ op: "heartbeat", worker, stale: false, headroom: cmd!.headroom, draining: false, degraded: false, rejoin: true }))
            queue.unshift({ op: "advance", ms: cmd.ms }, ...beats)
            continue
          }
          now += 1
          if (cmd.op === "advance") {
            now += cmd.ms
            continue
          }
          if (cmd.op === "wipe") {
            memory.wipe(cmd.bucket)
            await wipeBucket(live.client, prefix, cmd.bucket)
            continue
          }
          const incarnation = `inc${known.serial++}`
          if (cmd.op === "resolve" || cmd.op === "resolveMany") {
            const resolves = cmd.op === "resolve" ? [cmd] : cmd.resolves
            const actual = apply(redis, cmd, now, known, incarnation)
            const expected: Array<unknown> = []
            for (const { resolve, index, report } of inSerialOrder(resolves)) {
              const before = snapshotBefore(memory, resolve, now)
              const answer = await apply(memory, resolve, now, known, incarnation)
              checkResolve(memory, resolve, now, known, answer, before)
              expected[index] = answer
              covered.count(answer)
              report(answer)
            }
            expect(await actual, `${cmd.op} at ${now}: ${JSON.stringify(cmd)}`).toEqual(cmd.op === "resolve" ? expected[0] : expected)
            continue
          }
          const rowBefore = cmd.op === "release" || cmd.op === "tag" ? rowOf(memory, cmd) : undefined
          const expected = await apply(memory, cmd, now, known, incarnation)
          const actual = await apply(redis, cmd, now, known, incarnation)
          expect(actual, `${cmd.op} at ${now}: ${JSON.stringify(cmd)}`).toEqual(expected)
          if (cmd.op === "release" || cmd.op === "tag") {
            checkOwnerCheck(memory, cmd, rowBefore, expected as CasOutcome)
            covered.count(expected)
          }
          if (cmd.op === "callerPlacement") checkCaller(known, (expected as CallerPlacement).caller)
          // Only callerPlacement reads a caller key back.
          else expect(JSON.stringify(expected) ?? "", `${cmd.op} shows a caller key`).not.toMatch(/callerKey-/)
          if (cmd.op === "heartbeat" && Array.isArray(expected)) (expected as Array<unknown>).slice(0, 1).forEach(covered.count)
          if (cmd.op === "register") {
            known.incarnations.set(cmd.worker, incarnation)
            known.registrations.set(cmd.worker, cmd)
            known.callerKeys.set(incarnation, cmd.callerKey)
          }
          // A live worker told its lease is lost registers again.
          if (cmd.op === "heartbeat" && cmd.rejoin === true && (expected as Array<{ _tag: string }>).some((a) => a._tag === "LeaseLost")) queue.unshift(known.registrations.get(cmd.worker)!)
        }
      },
      { runs: REACH.numRuns }
    )
    covered.print(`${layer}, ${mode}`)
  }, DEEP ? 3_600_000 : 240_000)
})
