// The registry on Redis (DESIGN 3): one Lua script per operation, every script on one
// bucket. ioredis loads each script once per connection and then calls it by sha
// (EVALSHA, reloaded on NOSCRIPT). An all-bucket fan-out goes as one pipeline per shard
// (one in all on a single server) and reports bucket by bucket, so a dead shard fails only
// its own buckets.
import keySlot from "cluster-key-slot"
import { Effect, Layer } from "effect"
import { Cluster } from "ioredis"
import { AppConfig } from "../AppConfig.js"
import { RegistryUnavailable } from "../Errors.js"
import { Metrics } from "../observe/Metrics.js"
import { Backend, type FanOut, type RegistryBackend } from "./Backend.js"
import { makeBatcher } from "./Batcher.js"
import {
  memberKey,
  minLeaseLeftMs,
  type BucketHeartbeat,
  type CasOutcome,
  type NamespaceRegistration,
  type PlacementKey,
  type PlacementView,
  type RegisterOutcome,
  type RegistryPolicy,
  type ResolveOutcome,
  type ResolveQuery,
  type WindDownEntry,
  type WindDownOutcome,
  type WorkerView
} from "./Domain.js"
import { policyOf } from "./Policy.js"
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
  options: { readonly prefix: string; readonly buckets: number; readonly policy: RegistryPolicy; readonly observe?: ObserveCall }
): RegistryBackend => {
  const { prefix, buckets, policy, observe } = options
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
      observed(observe, name, () => fanOut<A>(client, tags, only, `pinboard_${name}`, [String(now), ...args]), (out) => out.unreached.length > 0)
    )
  const everyVoid = (name: ScriptName, now: number, args: ReadonlyArray<string>): Effect.Effect<FanOut<void>> =>
    Effect.map(every(name, now, args), (out) => ({ ...out, reached: out.reached.map(([b]) => [b, undefined] as const) }))
  const keyArgs = (key: PlacementKey) => [key.env, key.namespace, key.id]
  const policyArgs = [
    String(policy.leaseMs),
    String(minLeaseLeftMs(policy.leaseMs)),
    String(policy.balanceFactor),
    String(policy.nackThreshold),
    String(policy.nackWindowMs)
  ]
  // The resolve batch's arguments before its queries, made once per bucket: keys, now (unused), policy.
  const resolveHeads = tags.map((tag) => [`${tag}:cold`, tag, "0", ...policyArgs])
  const sendResolves = (bucket: number, queries: ReadonlyArray<string>): Promise<ReadonlyArray<ResolveOutcome>> =>
    invoke<ReadonlyArray<string>>("resolve", resolveHeads[bucket]!.concat(queries)).then((replies) => replies.map(decodeResolve))
  const resolveBatched = makeBatcher(buckets, sendResolves, (cause) => new RegistryUnavailable({ cause }))

  return {
    buckets,
    register: (now, r, only) =>
      every<string>("register", now, [
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
      ], only).pipe(Effect.map((out) => ({ ...out, reached: out.reached.map(([b, reply]) => [b, decodeRegister(reply)] as const) }))),
    heartbeat: (now, beat) =>
      every<Reply>("heartbeat", now, [
        beat.worker,
        beat.incarnation,
        String(now + policy.leaseMs),
        String(beat.headroom),
        flag(beat.draining),
        flag(beat.degraded)
      ]).pipe(Effect.map((out) => ({ ...out, reached: out.reached.map(([b, reply]) => [b, decodeHeartbeat(reply)] as const) }))),
    deregister: (now, worker, incarnation) => everyVoid("deregister", now, [worker, incarnation]),
    nack: (now, worker) => everyVoid("nack", now, [worker, String(policy.nackWindowMs)]),
    sweep: (now) => everyVoid("sweep", now, []),
    resolve: (bucket, now, query) => resolveBatched(bucket, packResolve(now, query)),
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
    workers: (now) =>
      attempt(() => {
        const [first, ...others] = byShard(client, tags, all).map((buckets) => call<ReadonlyArray<Reply>>("workers", buckets[0]!, now, []))
        for (const other of others) other.catch(() => undefined)
        return first!.catch((cause: unknown) => (others.length === 0 ? Promise.reject(cause) : Promise.any(others)))
      }).pipe(Effect.map((rows) => decodeWorkers(rows, now, policy))),
    // On a cluster, the first master to answer: one dead shard must not make Pinboard unready.
    time: attempt(() => (client instanceof Cluster ? Promise.any(client.nodes("master").map((node) => node.time())) : client.time())).pipe(
      Effect.map((time) => {
        const [seconds, micros] = time as unknown as [string, string]
        return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
      })
    )
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

/** Runs one script on each of `only` (bucket numbers), one pipeline per shard; never fails as a whole. */
const fanOut = async <A>(
  client: RedisClient,
  tags: ReadonlyArray<string>,
  only: ReadonlyArray<number>,
  command: string,
  args: ReadonlyArray<string>
): Promise<FanOut<A>> => {
  const answers: Array<{ readonly bucket: number; readonly ok: boolean; readonly value: unknown }> = []
  await Promise.all(
    byShard(client, tags, only).map(async (buckets) => {
      const pipeline = client.pipeline() as unknown as Record<string, (...a: Array<string>) => void> & {
        exec: () => Promise<Array<[Error | null, unknown]> | null>
      }
      for (const bucket of buckets) pipeline[command]!(`${tags[bucket]}:cold`, tags[bucket]!, ...args)
      const results = await pipeline.exec().catch((cause: unknown) => buckets.map(() => [cause, undefined] as const))
      buckets.forEach((bucket, i) => {
        const [error, value] = results?.[i] ?? [new Error("no reply"), undefined]
        answers.push(error === null ? { bucket, ok: true, value } : { bucket, ok: false, value: error })
      })
    })
  )
  answers.sort((a, b) => a.bucket - b.bucket)
  const failed = answers.filter((a) => !a.ok)
  // A pipeline does not follow a failover by itself: learn the new masters for the next fan-out.
  if (failed.length > 0 && client instanceof Cluster) client.refreshSlotsCache()
  return {
    reached: answers.filter((a) => a.ok).map((a) => [a.bucket, a.value as A] as const),
    unreached: failed.map((a) => a.bucket),
    ...(failed.length > 0 ? { cause: failed[0]!.value } : {})
  }
}

const decodeRegister = (reply: string): RegisterOutcome =>
  reply === "conflict" ? { _tag: "BindingConflict" } : { _tag: "Registered" }

const flag = (value: boolean): string => (value ? "1" : "0")
const text = (value: string | number | null | undefined): string => String(value ?? "")

/** r1 and r2 travel scaled by 2^26: integers print fast and any double still round-trips exactly. */
const RANDOM_SCALE = 2 ** 26

/** One resolve query as one script argument (see resolve.lua); no field holds "\n", nor "," but the last. */
const packResolve = (now: number, q: ResolveQuery): string =>
  `${now}\n${q.env}\n${q.namespace}\n${q.id}\n${q.hostname}\n${q.takeover ?? ""}\n${q.caller ?? ""}\n${q.affinity}\n${q.r1 * RANDOM_SCALE}\n${q.r2 * RANDOM_SCALE}\n${q.excluded.join(",")}`

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
  const windDown: Array<WindDownEntry> = []
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
      const nacks = now < Number(nackStart) + policy.nackWindowMs ? Number(nackCount) : 0
      return {
        worker: worker!,
        advertiseUrl: url!,
        namespaces: JSON.parse(namespaces!) as ReadonlyArray<NamespaceRegistration>,
        headroom: Number(headroom),
        leaseExpiresAt: Number(lease),
        draining: draining === "1",
        degraded: degraded === "1" || nacks >= policy.nackThreshold,
        nacks
      }
    })
    .sort((a, b) => (a.worker < b.worker ? -1 : 1))

interface RedisBackendOptions {
  readonly target: RedisTarget
  readonly prefix: string
  readonly buckets: number
  readonly policy: RegistryPolicy
}

/** The registry on Redis: connected when the layer is built, disconnected when it is released. */
export const layer = (options: RedisBackendOptions): Layer.Layer<Backend, never, Metrics> =>
  Layer.scoped(
    Backend,
    Effect.gen(function* () {
      const metrics = yield* Metrics
      const client = yield* connectRedis(options.target)
      return makeRedisBackend(client, { ...options, ...(metrics.enabled ? { observe: metrics.redisCall } : {}) })
    })
  )

export const layerConfig: Layer.Layer<Backend, never, AppConfig | Metrics> = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) => layer({ target: config.redis, prefix: config.redis.prefix, buckets: config.buckets, policy: policyOf(config) }))
)
