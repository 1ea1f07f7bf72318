// The registry on Redis (docs/protocol.md): one Lua script per operation, every script on one
// bucket. ioredis loads each script once per connection and then calls it by sha
// (EVALSHA, reloaded on NOSCRIPT). An all-bucket fan-out goes as one pipeline per shard
// (one in all on a single server) and reports bucket by bucket, so a dead shard fails only
// its own buckets.
import keySlot from "cluster-key-slot"
import { Effect, type Scope } from "effect"
import { Cluster } from "ioredis"
import { RegistryUnavailable } from "../Errors.js"
import type { MetricsService } from "../observe/Metrics.js"
import type { FanOut, RegistryBackend } from "./RegistryBackend.js"
import { makeBatcher } from "./Batcher.js"
import { makeCoalescer, type BucketAnswer, type BucketCall } from "./Coalescer.js"
import { propose } from "./MembershipView.js"
import { makeRedisViews } from "./RedisView.js"
import {
  memberKey,
  minLeaseLeftMs,
  workerViewOf,
  rowKey,
  type BucketHeartbeat,
  type CasOutcome,
  type NamespaceRegistration,
  type PlacementKey,
  type PlacementView,
  type RegisterOutcome,
  type RegistryPolicy,
  type ResolveOutcome,
  type ResolveQuery,
  type WindDownDue,
  type WindDownOutcome,
  type WorkerView
} from "./Domain.js"
import { connectRedis, type RedisClient, type RedisTarget, type ScriptName, type ScriptReply as Reply } from "./RedisConnection.js"

/** Told of every script call: which script, how long it took, whether it failed. */
export type ObserveCall = (script: string, seconds: number, failed: boolean) => void

/** The promise, with its round trip reported to `observe` (when there is one). */
const observed = <A>(observe: ObserveCall | undefined, script: string, run: () => Promise<A>, failedOf: (a: A) => boolean): Promise<A> => {
  if (observe === undefined) return run()
  const started = performance.now()
  return run().then(
    (value) => {
      observe(script, (performance.now() - started) / 1000, failedOf(value))
      return value
    },
    (error: unknown) => {
      observe(script, (performance.now() - started) / 1000, true)
      throw error
    }
  )
}

export const makeRedisBackend = (
  client: RedisClient,
  options: {
    readonly prefix: string
    readonly buckets: number
    readonly policy: RegistryPolicy
    readonly observe?: ObserveCall
    /** Test seam: how the membership views are made (a test may hold one stale). */
    readonly makeViews?: typeof makeRedisViews
  }
): RegistryBackend => {
  const { prefix, buckets, policy, observe, makeViews = makeRedisViews } = options
  const tags = Array.from({ length: buckets }, (_, b) => `{${prefix}:${b}}`)
  const commands = client as unknown as Record<string, (...args: Array<string>) => Promise<unknown>>

  /** One script call with its whole argument list (keys first), reported to `observe`. */
  const invoke = <A>(name: ScriptName, args: ReadonlyArray<string>) => {
    const run = () => commands[`pinboard_${name}`]!.apply(client, args as Array<string>) as Promise<A>
    return observe === undefined ? run() : observed(observe, name, run, () => false)
  }
  const call = <A>(name: ScriptName, bucket: number, now: number, args: ReadonlyArray<string>) => {
    const tag = tags[bucket]!
    return invoke<A>(name, [`${tag}:cold`, tag, String(now), ...args])
  }
  const attempt = <A>(run: () => Promise<A>) =>
    Effect.tryPromise({ try: run, catch: (cause) => new RegistryUnavailable({ cause }) })
  const one = <A>(name: ScriptName, bucket: number, now: number, args: ReadonlyArray<string>) =>
    attempt(() => call<A>(name, bucket, now, args))
  const all = tags.map((_, bucket) => bucket)
  const every = <A>(name: ScriptName, now: number, args: ReadonlyArray<string>, only: ReadonlyArray<number> = all): Effect.Effect<FanOut<A>> =>
    Effect.promise(() =>
      observed(observe, name, () => fanOut(client, tags, only.map((bucket) => ({ bucket, args: [String(now), ...args] })), `pinboard_${name}`), (out) => out.some((a) => !a.ok))
    ).pipe(Effect.map((answers) => fanOutOf<A>(answers)))
  // Membership writes, coalesced per bucket across workers: fleet.lua's entries.
  const fleetWrite = makeCoalescer((calls) =>
    observed(observe, "fleet", () => fanOut(client, tags, calls.map((c) => ({ bucket: c.bucket, args: ["0", ...c.args] })), "pinboard_fleet"), (out) =>
      out.some((a) => !a.ok)
    )
  )
  const keyArgs = (key: PlacementKey) => [key.env, key.namespace, key.id]
  const minLeaseLeft = minLeaseLeftMs(policy.leaseMs)
  const policyArgs = [String(policy.leaseMs), String(minLeaseLeft), String(policy.nackThreshold), String(policy.nackWindowMs)]
  // The resolve batch's arguments before its queries, made once per bucket: keys, now (unused), policy.
  const resolveHeads = tags.map((tag) => [`${tag}:cold`, tag, "0", ...policyArgs])
  const sendResolves = (bucket: number, queries: ReadonlyArray<string>): Promise<ReadonlyArray<string>> =>
    invoke<ReadonlyArray<string>>("resolve", resolveHeads[bucket]!.concat(queries))
  const resolveBatched = makeBatcher(buckets, sendResolves, (cause) => new RegistryUnavailable({ cause }))
  const views = makeViews(buckets, (bucket, now, args) => call<ReadonlyArray<string>>("view", bucket, now, args), minLeaseLeft)
  const absorb = (bucket: number, now: number, reply: ReadonlyArray<string>) =>
    Effect.tryPromise({ try: () => views.absorb(bucket, now, reply.slice(1)), catch: (cause) => new RegistryUnavailable({ cause }) })

  /** Placements under way in this Pinboard, by bucket and row key: an "again" answer waits for its id's. */
  const placing = new Map<string, Promise<void>>()
  const placingKey = (bucket: number, key: PlacementKey) => `${bucket}\n${rowKey(key)}`

  /**
   * docs/protocol.md "Resolution" with the ranking in Pinboard: the first call serves a placed id as before; a new one
   * comes back with what the bucket's view lacks, the view proposes, the script checks the
   * proposal at `now`; a refused proposal is ranked once more from the refreshed view.
   */
  const resolve = (bucket: number, now: number, query: ResolveQuery): Effect.Effect<ResolveOutcome, RegistryUnavailable> => {
    const ask = (mode: "a" | "p" | "f", proposal: string) => {
      const view = views.view(bucket)
      return resolveBatched(bucket, packResolve(now, query, mode, proposal, view.gen, view.seq))
    }
    const proposeAfter = (reply: string, mode: "p" | "f") =>
      Effect.flatMap(absorb(bucket, now, reply.split("\n")), (short) => ask(mode, propose(views.view(bucket), query, now, short, policy)))
    return Effect.flatMap(ask("a", ""), (first): Effect.Effect<ResolveOutcome, RegistryUnavailable> => {
      if (first === "again") {
        // The same id's placement began earlier in the same call: ask again once it is done.
        const earlier = placing.get(placingKey(bucket, query))
        return Effect.zipRight(earlier === undefined ? Effect.void : Effect.promise(() => earlier), resolve(bucket, now, query))
      }
      if (!first.startsWith("choose\n")) return Effect.succeed(decodeResolve(first))
      const key = placingKey(bucket, query)
      let done = () => {}
      placing.set(key, new Promise<void>((resolve) => (done = resolve)))
      return Effect.flatMap(proposeAfter(first, "p"), (second) =>
        second.startsWith("stale\n") ? Effect.map(proposeAfter(second, "f"), decodeResolve) : Effect.succeed(decodeResolve(second))
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
  const sweepOn = (bucket: number, now: number) =>
    Effect.iterate("more", {
      while: (answer) => answer === "more",
      body: () => one<string>("sweep", bucket, now, [String(policy.leaseMs)])
    })

  return {
    buckets,
    register: (now, r, only) =>
      fleetWrite<string>(only ?? all, [
        "r",
        String(now),
        r.worker,
        r.incarnation,
        r.advertiseUrl,
        String(now + policy.leaseMs),
        String(r.headroom),
        flag(r.draining),
        JSON.stringify(r.namespaces),
        r.namespaces.map((n) => memberKey(n.env, n.namespace)).join("\n"),
        r.epoch ?? "0",
        r.namespaces.flatMap((n) => (n.hostname === "" ? [] : [`${n.hostname}|${n.namespace}|${n.env}`])).join("\n")
      ]).pipe(Effect.map((out) => ({ ...out, reached: out.reached.map(([b, reply]) => [b, decodeRegister(reply)] as const) }))),
    heartbeat: (now, beat) =>
      fleetWrite<Reply>(all, [
        "h",
        String(now),
        beat.worker,
        beat.incarnation,
        String(now + policy.leaseMs),
        String(beat.headroom),
        flag(beat.draining),
        flag(beat.degraded)
      ]).pipe(Effect.map((out) => ({ ...out, reached: out.reached.map(([b, reply]) => [b, decodeHeartbeat(reply)] as const) }))),
    deregister: (now, worker, incarnation) => Effect.map(fleetWrite(all, ["d", String(now), worker, incarnation]), withoutAnswers),
    nack: (now, worker) => Effect.map(fleetWrite(all, ["n", String(now), worker, String(policy.nackWindowMs)]), withoutAnswers),
    // One pipelined call per bucket; the buckets with more to do then go on one call at a time,
    // so that a lapse of many rows never holds a shard for longer than one slice.
    sweep: (now) =>
      Effect.flatMap(every<string>("sweep", now, [String(policy.leaseMs)]), (out) =>
        Effect.forEach(
          out.reached.filter(([, answer]) => answer === "more"),
          ([bucket]) => Effect.either(sweepOn(bucket, now)),
          { discard: true }
        ).pipe(Effect.as(withoutAnswers(out)))
      ),
    resolve,
    release: (bucket, now, key, epoch) =>
      one<Reply>("release", bucket, now, [...keyArgs(key), epoch]).pipe(Effect.map(decodeCas)),
    tag: (bucket, now, key, epoch, value) =>
      one<Reply>("tag", bucket, now, [...keyArgs(key), epoch, value]).pipe(Effect.map(decodeCas)),
    beginWindDown: (bucket, now, key, epoch) =>
      one<Reply>("winddown", bucket, now, [...keyArgs(key), epoch, String(now + policy.leaseMs)]).pipe(
        Effect.map(decodeWindDown)
      ),
    placement: (bucket, now, key) =>
      one<Reply>("placement", bucket, now, keyArgs(key)).pipe(Effect.map((reply) => decodePlacement(key, reply))),
    // Bucket 0 (as the embedded registry), else the first other shard that answers, asked at once.
    workers: (now, after, limit) =>
      attempt(() => {
        const [first, ...others] = byShard(client, tags, all).map((buckets) =>
          call<ReadonlyArray<Reply>>("workers", buckets[0]!, now, [after, String(limit)])
        )
        for (const other of others) other.catch(() => undefined)
        return first!.catch((cause: unknown) => (others.length === 0 ? Promise.reject(cause) : Promise.any(others)))
      }).pipe(Effect.map((rows) => decodeWorkers(rows, now, policy))),
    placementsHeld: (now, workers) => every<ReadonlyArray<number>>("held", now, workers),
    // On a cluster, the first master to answer: a dead or hung shard must leave the registry
    // neither without a time nor slow to sample it (docs/deploy.md "Clocks").
    time: attempt(() => (client instanceof Cluster ? Promise.any(client.nodes("master").map((node) => node.time())) : client.time())).pipe(
      Effect.map((time) => {
        const [seconds, micros] = time
        return Number(seconds) * 1000 + Number(micros) / 1000
      })
    )
  }
}

const withoutAnswers = (out: FanOut<unknown>): FanOut<void> => ({ ...out, reached: out.reached.map(([b]) => [b, undefined] as const) })

/** Bucket by bucket answers as a fan-out's outcome. */
const fanOutOf = <A>(answers: ReadonlyArray<BucketAnswer>): FanOut<A> => {
  const failed = answers.filter((a) => !a.ok)
  return {
    reached: answers.filter((a) => a.ok).map((a) => [a.bucket, a.value as A] as const),
    unreached: failed.map((a) => a.bucket),
    ...(failed.length > 0 ? { cause: failed[0]!.value } : {})
  }
}

/** `buckets` grouped by shard (by the nodes serving their hash tag's slot); one group on a single server. */
const byShard = (client: RedisClient, tags: ReadonlyArray<string>, buckets: ReadonlyArray<number>): ReadonlyArray<ReadonlyArray<number>> => {
  if (!(client instanceof Cluster)) return [buckets]
  const groups = new Map<string, Array<number>>()
  for (const bucket of buckets) {
    const shard = client.slots[keySlot(tags[bucket]!)]?.join(";") ?? ""
    groups.set(shard, [...(groups.get(shard) ?? []), bucket])
  }
  return [...groups.values()]
}

/** Runs one script call per bucket (its own arguments), one pipeline per shard; never fails as a whole. */
const fanOut = async (client: RedisClient, tags: ReadonlyArray<string>, calls: ReadonlyArray<BucketCall>, command: string): Promise<Array<BucketAnswer>> => {
  const answers: Array<BucketAnswer> = []
  const argsOf = new Map(calls.map((c) => [c.bucket, c.args]))
  await Promise.all(
    byShard(client, tags, calls.map((c) => c.bucket)).map(async (buckets) => {
      const pipeline = client.pipeline() as unknown as Record<string, (...a: Array<string>) => void> & {
        exec: () => Promise<Array<[Error | null, unknown]> | null>
      }
      for (const bucket of buckets) pipeline[command]!(`${tags[bucket]}:cold`, tags[bucket]!, ...argsOf.get(bucket)!)
      const results = await pipeline.exec().catch((cause: unknown) => buckets.map(() => [cause, undefined] as const))
      buckets.forEach((bucket, i) => {
        const [error, value] = results?.[i] ?? [new Error("no reply"), undefined]
        answers.push(error === null ? { bucket, ok: true, value: value as ReadonlyArray<unknown> } : { bucket, ok: false, value: error })
      })
    })
  )
  answers.sort((a, b) => a.bucket - b.bucket)
  // A pipeline does not follow a failover by itself: learn the new masters for the next fan-out.
  if (answers.some((a) => !a.ok) && client instanceof Cluster) client.refreshSlotsCache()
  return answers
}

const decodeRegister = (reply: string): RegisterOutcome =>
  reply === "conflict" ? { _tag: "BindingConflict" } : { _tag: "Registered" }

const flag = (value: boolean): string => (value ? "1" : "0")
const text = (value: string | number | null | undefined): string => String(value ?? "")

/** One resolve query as one script argument (see resolve.lua); no field holds "\n". */
const packResolve = (now: number, q: ResolveQuery, mode: "a" | "p" | "f", proposal: string, gen: string, seq: string): string =>
  `${now}\n${q.env}\n${q.namespace}\n${q.id}\n${q.hostname}\n${q.takeover ?? ""}\n${mode}\n${proposal}\n${gen}\n${seq}`

const decodeResolve = (reply: string): ResolveOutcome => {
  const fields = reply.split("\n")
  switch (fields[0]) {
    case "placed":
      return { _tag: "Placed", worker: fields[1]!, advertiseUrl: fields[2]!, epoch: fields[3]!, isNew: fields[4] === "1" }
    case "unknown":
      return { _tag: "UnknownNamespace" }
    case "cold":
      return { _tag: "ColdStart", retryAfterMs: Number(fields[1]) }
    case "rebound":
      return { _tag: "Rebound", env: fields[1]! }
    case "held":
      return { _tag: "HeldByAnotherHostname" }
    case "takeover":
      return { _tag: "TakeoverInProgress", retryAfterMs: Number(fields[1]) }
    case "displaced":
      return { _tag: "Displaced", retryAfterMs: Number(fields[1]) }
    default:
      return { _tag: "NoLiveBackends" }
  }
}

const current = (reply: Reply): string | null => (typeof reply[1] === "string" ? reply[1] : null)

const decodeCas = (reply: Reply): CasOutcome =>
  reply[0] === "done" ? { _tag: "Done" } : { _tag: "Conflict", current: current(reply) }

const decodeWindDown = (reply: Reply): WindDownOutcome =>
  reply[0] === "winding" ? { _tag: "WindingDown", deadline: Number(reply[1]) } : { _tag: "Conflict", current: current(reply) }

const decodeHeartbeat = (reply: Reply): BucketHeartbeat => {
  if (reply[0] !== "renewed") return { _tag: "LeaseLost" }
  const windDown: Array<WindDownDue> = []
  for (let i = 1; i + 4 < reply.length; i += 5) {
    windDown.push({
      env: text(reply[i]),
      namespace: text(reply[i + 1]),
      id: text(reply[i + 2]),
      epoch: text(reply[i + 3]),
      deadline: Number(reply[i + 4])
    })
  }
  return { _tag: "Renewed", windDown }
}

const decodePlacement = (key: PlacementKey, reply: Reply): PlacementView | undefined => {
  if (reply.length === 0) return undefined
  const [worker, incarnation, epoch, placedAt, hostname, tag, windDownAt, url, live] = reply.map(text)
  return {
    ...key,
    worker: worker!,
    incarnation: incarnation!,
    epoch: epoch!,
    placedAt: Number(placedAt),
    hostname: hostname!,
    tag: tag!,
    windDownAt: Number(windDownAt),
    advertiseUrl: url === "" ? null : url!,
    live: live === "1"
  }
}

const decodeWorkers = (rows: ReadonlyArray<Reply>, now: number, policy: RegistryPolicy): ReadonlyArray<WorkerView> =>
  rows
    .map((row) => {
      const [worker, url, namespaces, headroom, lease, draining, degraded, nackStart, nackCount] = row.map(text)
      const record = {
        worker: worker!,
        advertiseUrl: url!,
        namespaces: JSON.parse(namespaces!) as ReadonlyArray<NamespaceRegistration>,
        headroom: Number(headroom),
        leaseExpiresAt: Number(lease),
        draining: draining === "1",
        degraded: degraded === "1",
        nackWindowStart: Number(nackStart),
        nackCount: Number(nackCount)
      }
      // The nack window's rule is the model's (Domain.ts), on the row as Redis holds it.
      return workerViewOf(record, now, policy)
    })
    .sort((a, b) => (a.worker < b.worker ? -1 : 1))

interface RedisBackendOptions {
  readonly target: RedisTarget
  readonly prefix: string
  readonly buckets: number
  readonly policy: RegistryPolicy
}

/** The registry on Redis: connected now, disconnected when the scope closes. */
export const redisBackend = (options: RedisBackendOptions, metrics: MetricsService): Effect.Effect<RegistryBackend, never, Scope.Scope> =>
  Effect.map(connectRedis(options.target), (client) =>
    makeRedisBackend(client, { ...options, ...(metrics.enabled ? { observe: metrics.redisCall } : {}) })
  )
