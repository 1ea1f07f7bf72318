// The registry on Redis (DESIGN 3): one Lua script per operation, every script on one
// bucket. ioredis loads each script once per connection and then calls it by sha
// (EVALSHA, reloaded on NOSCRIPT); auto-pipelining sends an all-bucket fan-out as one
// pipeline per node.
import { readFileSync } from "node:fs"
import { Effect } from "effect"
import { Cluster, Redis } from "ioredis"
import { RegistryUnavailable } from "../Errors.js"
import type { RegistryBackend } from "./Backend.js"
import { makeBatcher } from "./Batcher.js"
import {
  memberKey,
  minLeaseLeftMs,
  type BucketHeartbeat,
  type CasOutcome,
  type NamespaceRegistration,
  type PlacementKey,
  type PlacementView,
  type RegistryPolicy,
  type ResolveOutcome,
  type ResolveQuery,
  type WindDownEntry,
  type WindDownOutcome,
  type WorkerView
} from "./Domain.js"

export type RedisClient = Redis | Cluster

const SCRIPTS = [
  "register",
  "heartbeat",
  "deregister",
  "nack",
  "sweep",
  "resolve",
  "release",
  "tag",
  "winddown",
  "placement",
  "workers"
] as const
type ScriptName = (typeof SCRIPTS)[number]
type Reply = ReadonlyArray<string | number | null>

const readScript = (name: string): string => readFileSync(new URL(`./scripts/${name}.lua`, import.meta.url), "utf8")

/** Defines every script on the client as the command `pinboard_<name>`. */
export const defineScripts = (client: RedisClient): void => {
  const common = readScript("common")
  for (const name of SCRIPTS) {
    client.defineCommand(`pinboard_${name}`, { numberOfKeys: 1, lua: `${common}\n${readScript(name)}` })
  }
}

/**
 * Upper bound on one registry call: Redis slow or unreachable is a 503, never a hang
 * (DESIGN 9). Enforced by the client (`commandTimeout`, no offline queue) in real time.
 */
export const REGISTRY_CALL_TIMEOUT_MS = 1000

/** Client options that make every failure fast: no queueing while disconnected. */
export const clientOptions = {
  enableAutoPipelining: true,
  enableOfflineQueue: false,
  commandTimeout: REGISTRY_CALL_TIMEOUT_MS,
  maxRetriesPerRequest: 0,
  retryStrategy: (times: number) => Math.min(times * 100, 1000)
} as const

export const makeRedisBackend = (
  client: RedisClient,
  options: { readonly prefix: string; readonly buckets: number; readonly policy: RegistryPolicy }
): RegistryBackend => {
  const { prefix, buckets, policy } = options
  const tags = Array.from({ length: buckets }, (_, b) => `{${prefix}:${b}}`)
  const commands = client as unknown as Record<string, (...args: Array<string>) => Promise<unknown>>

  const call = <A>(name: ScriptName, bucket: number, now: number, args: ReadonlyArray<string>) => {
    const tag = tags[bucket]!
    return commands[`pinboard_${name}`]!(`${tag}:cold`, tag, String(now), ...args) as Promise<A>
  }
  const attempt = <A>(run: () => Promise<A>) =>
    Effect.tryPromise({ try: run, catch: (cause) => new RegistryUnavailable({ cause }) })
  const one = <A>(name: ScriptName, bucket: number, now: number, args: ReadonlyArray<string>) =>
    attempt(() => call<A>(name, bucket, now, args))
  const every = <A>(name: ScriptName, now: number, args: ReadonlyArray<string>) =>
    attempt(() => Promise.all(tags.map((_, bucket) => call<A>(name, bucket, now, args))))
  const keyArgs = (key: PlacementKey) => [key.env, key.namespace, key.id]
  const policyArgs = [
    String(policy.leaseMs),
    String(minLeaseLeftMs(policy.leaseMs)),
    String(policy.balanceFactor),
    String(policy.nackThreshold),
    String(policy.nackWindowMs)
  ]
  const resolveBatched = makeBatcher(
    buckets,
    (bucket, queries: ReadonlyArray<string>) =>
      call<ReadonlyArray<string>>("resolve", bucket, 0, [...policyArgs, ...queries]).then((replies) => replies.map(decodeResolve)),
    (cause) => new RegistryUnavailable({ cause })
  )

  return {
    buckets,
    register: (now, r) =>
      every("register", now, [
        r.worker,
        r.incarnation,
        r.advertiseUrl,
        String(now + policy.leaseMs),
        String(r.headroom),
        flag(r.draining),
        JSON.stringify(r.namespaces),
        r.namespaces.map((n) => memberKey(n.env, n.namespace)).join("\n")
      ]).pipe(Effect.asVoid),
    heartbeat: (now, beat) =>
      every<Reply>("heartbeat", now, [
        beat.worker,
        beat.incarnation,
        String(now + policy.leaseMs),
        String(beat.headroom),
        flag(beat.draining),
        flag(beat.degraded)
      ]).pipe(Effect.map((replies) => replies.map(decodeHeartbeat))),
    deregister: (now, worker, incarnation) => every("deregister", now, [worker, incarnation]).pipe(Effect.asVoid),
    nack: (now, worker) => every("nack", now, [worker, String(policy.nackWindowMs)]).pipe(Effect.asVoid),
    sweep: (now) => every("sweep", now, []).pipe(Effect.asVoid),
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
    workers: (now) =>
      one<ReadonlyArray<Reply>>("workers", 0, now, []).pipe(Effect.map((rows) => decodeWorkers(rows, now, policy))),
    time: attempt(() => client.time()).pipe(
      Effect.map((time) => {
        const [seconds, micros] = time as unknown as [string, string]
        return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
      })
    )
  }
}

const flag = (value: boolean): string => (value ? "1" : "0")
const text = (value: string | number | null | undefined): string => String(value ?? "")

/** r1 and r2 travel scaled by 2^26: integers print fast and any double still round-trips exactly. */
const RANDOM_SCALE = 2 ** 26

/** One resolve query as one script argument (see resolve.lua); no field holds "\n", nor "," but the last. */
const packResolve = (now: number, q: ResolveQuery): string =>
  `${now}\n${q.env}\n${q.namespace}\n${q.id}\n${q.hostname}\n${q.caller ?? ""}\n${q.affinity}\n${q.r1 * RANDOM_SCALE}\n${q.r2 * RANDOM_SCALE}\n${q.excluded.join(",")}`

const decodeResolve = (reply: string): ResolveOutcome => {
  const fields = reply.split("\n")
  switch (fields[0]) {
    case "placed":
      return { _tag: "Placed", worker: fields[1]!, advertiseUrl: fields[2]!, epoch: fields[3]!, isNew: fields[4] === "1" }
    case "unknown":
      return { _tag: "UnknownNamespace" }
    case "cold":
      return { _tag: "ColdStart", retryAfterMs: Number(fields[1]) }
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
