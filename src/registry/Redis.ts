// The registry on Redis (docs/protocol.md): one Lua script per operation, every script on one
// bucket. This file holds the protocol; the calls reach the shards through RedisFanOut.ts, and
// what each script is sent and answers is encoded and decoded in the *Wire.ts modules. ioredis
// loads each script once per connection and then calls it by sha (EVALSHA, reloaded on
// NOSCRIPT); the resolve batches go as prebuilt calls of their own (ScriptCall.ts), which do
// the same.
import { Effect, type Scope } from "effect"
import { Cluster } from "ioredis"
import { RegistryUnavailable } from "../Errors.js"
import { type MetricsService, type TimeRedisCall, untimed } from "../observe/Metrics.js"
import { makeBatcher } from "./Batcher.js"
import { makeCoalescer, type Coalesced } from "./Coalescer.js"
import { minLeaseLeftMs, rowKey, workerViewOf, type PlacementKey, type RegistryPolicy, type ResolveOutcome, type ResolveQuery } from "./Domain.js"
import { propose } from "./MembershipView.js"
import {
  callerPlacementArgs,
  decodeCallerPlacementReply,
  decodeCasReply,
  decodePlacementReply,
  decodeSweepReply,
  decodeWindDownReply,
  placementArgs,
  releaseArgs,
  sweepArgs,
  tagArgs,
  windDownArgs
} from "./PlacementWire.js"
import { connectRedis, makeClusterDiagnosis, scriptSourceOf, type RedisClient, type ScriptName } from "./RedisConnection.js"
import { byShard, coalescedOf, fanOut, firstMasterTime } from "./RedisFanOut.js"
import { NO_MASTER_KNOWN } from "./RedisFailure.js"
import { makeRedisHealth, type RedisHealth } from "./RedisHealth.js"
import { makeScriptCall } from "./ScriptCall.js"
import type { RedisTarget } from "./RedisTarget.js"
import { makeRedisViews } from "./RedisView.js"
import type { FanOut, RegistryBackend } from "./RegistryBackend.js"
import { decodeAskReply, decodeLastProposalReply, decodeProposalReply, encodeResolveQuery, ResolveMode, resolvePolicyArgs } from "./ResolveWire.js"
import type { ViewPayload } from "./ViewWire.js"
import { decodeTime, orDefect, UnexpectedReply } from "./WireReply.js"
import {
  decodeDoneReply,
  decodeHeartbeatReply,
  decodeHeldReply,
  decodeRegisterReply,
  decodeWorkersReply,
  encodeDeregisterEntry,
  encodeHeartbeatEntry,
  encodeNackEntry,
  encodeRegisterEntry,
  workersArgs
} from "./WorkerWire.js"

const neverFailed = () => false

export const makeRedisBackend = (
  client: RedisClient,
  options: {
    readonly prefix: string
    readonly buckets: number
    readonly policy: RegistryPolicy
    /** Times each round trip (the metrics'); by default, none is. */
    readonly timeCall?: TimeRedisCall
    /** Told of every failure, to say why Redis fails (RedisHealth.ts); silent when omitted. */
    readonly health?: RedisHealth
    /** On a Cluster, why no master is known (RedisConnection.ts makeClusterDiagnosis). */
    readonly whyNoMaster?: () => Promise<unknown>
    /** Test seam: how the membership views are made (a test may hold one stale). */
    readonly makeViews?: typeof makeRedisViews
  }
): RegistryBackend => {
  const { prefix, buckets, policy, timeCall = untimed, health = silentHealth, whyNoMaster = noDiagnosis, makeViews = makeRedisViews } = options
  const unavailable = (cause: unknown) => new RegistryUnavailable({ cause, reason: health.failed(cause).reason })
  /** Bucket by bucket answers as a fan-out's outcome. */
  const fanOutOf = <A>(out: Coalesced<A>): FanOut<A> =>
    out.cause === undefined ? { reached: out.reached, unreached: out.unreached } : { reached: out.reached, unreached: out.unreached, failure: unavailable(out.cause) }
  const tags = Array.from({ length: buckets }, (_, b) => `{${prefix}:${b}}`)
  const commands = client as unknown as Record<string, (...args: Array<string>) => Promise<unknown>>

  /** One script call with its whole argument list (keys first), timed. */
  const invoke = (name: ScriptName, args: ReadonlyArray<string>): Promise<unknown> => {
    const run = () => commands[`pinboard_${name}`]!.apply(client, args as Array<string>)
    return timeCall(name, run, neverFailed)
  }
  const call = (name: ScriptName, bucket: number, now: number, args: ReadonlyArray<string>) => {
    const tag = tags[bucket]!
    return invoke(name, [`${tag}:cold`, tag, String(now), ...args])
  }
  const attempt = <A>(run: () => Promise<A>) =>
    Effect.tryPromise({ try: run, catch: unavailable })
  const one = (name: ScriptName, bucket: number, now: number, args: ReadonlyArray<string>) =>
    attempt(() => call(name, bucket, now, args))
  const all = tags.map((_, bucket) => bucket)
  const every = (name: ScriptName, now: number, args: ReadonlyArray<string>, only: ReadonlyArray<number> = all): Effect.Effect<FanOut<unknown>> =>
    Effect.promise(() =>
      timeCall(name, () => fanOut(client, tags, only.map((bucket) => ({ bucket, args: [String(now), ...args] })), `pinboard_${name}`), (out) => out.some((a) => !a.ok))
    ).pipe(Effect.map((answers) => fanOutOf(coalescedOf(answers))))
  // Membership writes, coalesced per bucket across workers: fleet.lua's entries.
  const coalescedWrite = makeCoalescer((calls) =>
    timeCall("fleet", () => fanOut(client, tags, calls.map((c) => ({ bucket: c.bucket, args: ["0", ...c.args] })), "pinboard_fleet"), (out) =>
      out.some((a) => !a.ok)
    )
  )
  const fleetWrite = (buckets: ReadonlyArray<number>, entry: ReadonlyArray<string>) => Effect.map(coalescedWrite(buckets, entry), fanOutOf)
  const minLeaseLeft = minLeaseLeftMs(policy.leaseMs)
  // The resolve batch's arguments before its queries, prebuilt once per bucket: keys, then ResolveWire's.
  const resolveCall = makeScriptCall(client, scriptSourceOf(client, "resolve"), tags.map((tag) => [`${tag}:cold`, tag, ...resolvePolicyArgs(policy, minLeaseLeft)]))
  // One reply per query; whatever else comes back, each caller's decoder makes it a defect.
  const sendResolves = (bucket: number, queries: ReadonlyArray<string>) =>
    timeCall("resolve", () => resolveCall(bucket, queries), neverFailed) as Promise<ReadonlyArray<unknown>>
  const resolveBatched = makeBatcher(buckets, sendResolves, unavailable)
  const views = makeViews(buckets, (bucket, now, args) => call("view", bucket, now, args), minLeaseLeft)
  // A view page that decodes as unexpected is a defect, not the registry being unavailable.
  const absorb = (bucket: number, now: number, payload: ViewPayload) =>
    Effect.tryPromise({
      try: () => views.absorb(bucket, now, payload),
      catch: (cause) => (cause instanceof UnexpectedReply ? cause : unavailable(cause))
    }).pipe(Effect.catchTag("UnexpectedReply", Effect.die))

  /** Placements under way in this Pinboard, by bucket and row key: an AskAgain reply waits for its id's. */
  const placing = new Map<string, Promise<void>>()
  const placingKey = (bucket: number, key: PlacementKey) => `${bucket}\n${rowKey(key)}`

  /**
   * docs/protocol.md "Resolution" with the ranking in Pinboard (docs/protocol.md "Cost at scale"):
   * the first call serves a placed id as before; a new one comes back with what the bucket's view
   * lacks, the view proposes, the script checks the proposal at `now`; a refused proposal is
   * ranked once more from the refreshed view.
   */
  const resolve = (bucket: number, now: number, query: ResolveQuery): Effect.Effect<ResolveOutcome, RegistryUnavailable> => {
    const send = <R>(mode: ResolveMode, proposal: string, decode: (reply: unknown) => Effect.Effect<R>) => {
      const view = views.view(bucket)
      return resolveBatched(bucket, encodeResolveQuery(now, query, mode, proposal, view.gen, view.seq), decode)
    }
    const proposeFrom = <R>(payload: ViewPayload, mode: ResolveMode, decode: (reply: unknown) => Effect.Effect<R>) =>
      Effect.flatMap(absorb(bucket, now, payload), (short) => send(mode, propose(views.view(bucket), query, now, short, policy), decode))
    return Effect.flatMap(send(ResolveMode.ask, "", askReply), (first): Effect.Effect<ResolveOutcome, RegistryUnavailable> => {
      if (first._tag === "AskAgain") {
        // The same id's placement began earlier in the same call: ask again once it is done.
        const earlier = placing.get(placingKey(bucket, query))
        return Effect.andThen(earlier === undefined ? Effect.void : Effect.promise(() => earlier), resolve(bucket, now, query))
      }
      if (first._tag !== "ProposalWanted") return Effect.succeed(first)
      const key = placingKey(bucket, query)
      let done = () => {}
      placing.set(key, new Promise<void>((resolve) => (done = resolve)))
      return Effect.flatMap(proposeFrom(first.view, ResolveMode.propose, proposalReply), (second) =>
        second._tag === "ProposalRefused" ? proposeFrom(second.view, ResolveMode.lastProposal, lastProposalReply) : Effect.succeed(second)
      ).pipe(
        Effect.ensuring(
          Effect.sync(() => {
            placing.delete(key)
            done()
          })
        )
      )
    })
  }

  /** Runs a bucket's sweep again and again, one call at a time, while it reports more to do. */
  const sweepOn = (bucket: number, now: number): Effect.Effect<void, RegistryUnavailable> =>
    Effect.gen(function* () {
      let more = true
      while (more) more = yield* Effect.flatMap(one("sweep", bucket, now, sweepArgs(policy.leaseMs)), sweepReply)
    })

  return {
    buckets,
    register: (now, r, only) => Effect.flatMap(fleetWrite(only ?? all, encodeRegisterEntry(now, r, policy.leaseMs)), eachReply(decodeRegisterReply)),
    heartbeat: (now, beat) => Effect.flatMap(fleetWrite(all, encodeHeartbeatEntry(now, beat, policy.leaseMs)), eachReply(decodeHeartbeatReply)),
    deregister: (now, worker, incarnation) => Effect.flatMap(fleetWrite(all, encodeDeregisterEntry(now, worker, incarnation)), eachReply(decodeDoneReply)),
    nack: (now, worker) => Effect.flatMap(fleetWrite(all, encodeNackEntry(now, worker, policy.nackWindowMs)), eachReply(decodeDoneReply)),
    // One pipelined call per bucket; the buckets with more to do then go on one call at a time,
    // so that a lapse of many rows never holds a shard for longer than one slice.
    sweep: (now) =>
      Effect.flatMap(every("sweep", now, sweepArgs(policy.leaseMs)), eachReply(decodeSweepReply)).pipe(
        Effect.flatMap((out) =>
          Effect.forEach(
            out.reached.filter(([, more]) => more),
            ([bucket]) => Effect.result(sweepOn(bucket, now)),
            { discard: true }
          ).pipe(Effect.as(withoutAnswers(out)))
        )
      ),
    resolve,
    release: (bucket, now, key, epoch, owners) => Effect.flatMap(one("release", bucket, now, releaseArgs(key, epoch, owners)), releaseReply),
    tag: (bucket, now, key, epoch, value, owners) => Effect.flatMap(one("tag", bucket, now, tagArgs(key, epoch, value, owners)), tagReply),
    beginWindDown: (bucket, now, key, epoch) =>
      Effect.flatMap(one("winddown", bucket, now, windDownArgs(key, epoch, now + policy.leaseMs)), windDownReply),
    placement: (bucket, now, key) => Effect.flatMap(one("placement", bucket, now, placementArgs(key)), orDefect(decodePlacementReply(key))),
    callerPlacement: (bucket, now, key, worker) =>
      Effect.flatMap(one("placement", bucket, now, callerPlacementArgs(key, worker)), orDefect(decodeCallerPlacementReply(key))),
    // Bucket 0 (as the embedded registry), else the first other shard that answers, asked at once.
    workers: (now, after, limit) =>
      attempt(() => {
        const [first, ...others] = byShard(client, tags, all).map((buckets) => call("workers", buckets[0]!, now, workersArgs(after, limit)))
        for (const other of others) other.catch(() => undefined)
        return first!.catch((cause: unknown) => (others.length === 0 ? Promise.reject(cause) : Promise.any(others)))
      }).pipe(
        Effect.flatMap(workersReply),
        Effect.map((rows) => rows.map((row) => workerViewOf(row, now, policy)).sort((a, b) => (a.worker < b.worker ? -1 : 1)))
      ),
    placementsHeld: (now, workers) => Effect.flatMap(every("held", now, workers), eachReply(decodeHeldReply(workers.length))),
    // On a cluster, the first master to answer: a dead or hung shard must leave the registry
    // neither without a time nor slow to sample it (docs/deploy.md "Clocks").
    time: attempt(() => (client instanceof Cluster ? firstMasterTime(client, whyNoMaster) : client.time())).pipe(
      Effect.map((reply) => {
        health.sampled()
        return decodeTime(reply)
      })
    ),
    failing: () => health.current()?.reason
  }
}

const askReply = orDefect(decodeAskReply)
const proposalReply = orDefect(decodeProposalReply)
const lastProposalReply = orDefect(decodeLastProposalReply)
const sweepReply = orDefect(decodeSweepReply)
const releaseReply = orDefect(decodeCasReply("release"))
const tagReply = orDefect(decodeCasReply("tag"))
const windDownReply = orDefect(decodeWindDownReply)
const workersReply = orDefect(decodeWorkersReply)

/** Every reached bucket's reply decoded; one that is unexpected is a defect of the whole call. */
const eachReply = <A>(decode: (reply: unknown) => A) =>
  orDefect((out: FanOut<unknown>): FanOut<A> => ({ ...out, reached: out.reached.map(([b, reply]) => [b, decode(reply)] as const) }))

const withoutAnswers = (out: FanOut<unknown>): FanOut<void> => ({ ...out, reached: out.reached.map(([b]) => [b, undefined] as const) })

const noDiagnosis = () => Promise.resolve(new Error(NO_MASTER_KNOWN))
const silentHealth = makeRedisHealth({ failing: () => undefined, answering: () => undefined, count: () => undefined })

interface RedisBackendOptions {
  readonly target: RedisTarget
  readonly prefix: string
  readonly buckets: number
  readonly policy: RegistryPolicy
}

/** The registry on Redis: connected now, disconnected when the scope closes. */
export const redisBackend = (options: RedisBackendOptions, metrics: MetricsService): Effect.Effect<RegistryBackend, never, Scope.Scope> =>
  Effect.gen(function* () {
    // The failures are noticed outside any fiber (a connection's events, a call's rejection).
    const log = Effect.runForkWith(yield* Effect.context<never>())
    const health = makeRedisHealth({
      failing: (failure) => void log(Effect.logWarning("registry failing").pipe(Effect.annotateLogs({ reason: failure.reason, kind: failure.kind }))),
      answering: (after) => void log(Effect.logInfo("registry answering again").pipe(Effect.annotateLogs({ after: after.reason }))),
      count: metrics.registryFailure
    })
    const client = yield* connectRedis(options.target, health)
    return makeRedisBackend(client, {
      ...options,
      health,
      whyNoMaster: makeClusterDiagnosis(options.target),
      timeCall: metrics.timeRedisCall
    })
  })
