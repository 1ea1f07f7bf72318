// The connection to Redis (docs/protocol.md): one server, a Cluster or a server behind Sentinels, options that make every failure
// fast, and the Lua scripts defined once per client, each called by sha as `pinboard_<name>`.
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { Effect, Redacted } from "effect"
import { Cluster, Redis } from "ioredis"
import { NO_MASTER_KNOWN } from "./RedisFailure.js"
import type { RedisHealth } from "./RedisHealth.js"
import { clusterNodes, dropUndefined, nodeOptions, type RedisTarget } from "./RedisTarget.js"

/**
 * Upper bound on one Redis call: Redis slow or unreachable is a 503, never a hang. Enforced
 * by the Redis client itself (`commandTimeout`, no offline queue), in real time: it bounds a
 * socket's wait, which only a real Redis has.
 */
export const REGISTRY_CALL_TIMEOUT_MS = 1_000

export type RedisClient = Redis | Cluster

const SCRIPTS = [
  "fleet",
  "sweep",
  "resolve",
  "release",
  "tag",
  "winddown",
  "placement",
  "workers",
  "view",
  "held"
] as const
export type ScriptName = (typeof SCRIPTS)[number]

const readScript = (name: string): string => readFileSync(new URL(`./scripts/${name}.lua`, import.meta.url), "utf8")

/** A script as the client sends it: its text for EVAL, its sha for EVALSHA, how many of its arguments are keys. */
export interface ScriptSource {
  readonly lua: string
  readonly sha: string
  readonly numberOfKeys: number
}

/** The scripts defined on each client, by name. */
const defined = new WeakMap<RedisClient, Map<ScriptName, ScriptSource>>()

/** Defines one script on the client as the command `pinboard_<name>` (a test may define its own). */
export const defineScript = (client: RedisClient, name: ScriptName, lua: string): void => {
  const source = { lua, sha: createHash("sha1").update(lua).digest("hex"), numberOfKeys: 1 }
  client.defineCommand(`pinboard_${name}`, { numberOfKeys: source.numberOfKeys, lua })
  const scripts = defined.get(client) ?? new Map<ScriptName, ScriptSource>()
  defined.set(client, scripts.set(name, source))
}

/** Defines every script on the client as the command `pinboard_<name>`. */
export const defineScripts = (client: RedisClient): void => {
  const common = readScript("common")
  for (const name of SCRIPTS) defineScript(client, name, `${common}\n${readScript(name)}`)
}

/** The script `name` as defined on the client. */
export const scriptSourceOf = (client: RedisClient, name: ScriptName): ScriptSource => {
  const source = defined.get(client)?.get(name)
  if (source === undefined) throw new Error(`no script ${name} defined on this client: defineScripts first`)
  return source
}

/**
 * Client options that make every failure fast: no queueing while disconnected. RESP2, as
 * ioredis 5 spoke (ioredis 6 defaults to RESP3): under RESP3 ioredis also signs up for a managed
 * Redis's maintenance notifications and then stretches `commandTimeout` to 10 s during a
 * maintenance window, and Lua booleans would answer otherwise.
 */
export const clientOptions = {
  protocol: 2,
  enableAutoPipelining: true,
  enableOfflineQueue: false,
  commandTimeout: REGISTRY_CALL_TIMEOUT_MS,
  maxRetriesPerRequest: 0,
  retryStrategy: (times: number) => Math.min(times * 100, 1000)
} as const

/**
 * Cluster options: the same fast failure per node, and a bounded retry while a shard fails
 * over (a closed connection or CLUSTERDOWN is retried every 100 ms, at most 8 times), so a
 * dead shard's buckets answer 503 within about a second and the others are not held up.
 * No auto-pipelining: after a failover ioredis 5 answers auto-pipelined commands with the
 * MOVED error itself instead of following it (seen with a local cluster); the resolve
 * batcher and the per-shard fan-out pipelines do the grouping instead. (Pipelining the
 * resolve batches of one turn per shard as well was tried: no measurable gain.)
 */
export const clusterOptions = {
  enableAutoPipelining: false,
  enableOfflineQueue: false,
  lazyConnect: true,
  maxRedirections: 8,
  retryDelayOnFailover: 100,
  retryDelayOnClusterDown: 100,
  retryDelayOnTryAgain: 100,
  slotsRefreshTimeout: REGISTRY_CALL_TIMEOUT_MS,
  // Learn a new topology (a failover, resharding) even while nothing fails.
  slotsRefreshInterval: 5000,
  redisOptions: clientOptions
} as const

const newClient = (target: RedisTarget): RedisClient => {
  if (target.cluster !== undefined) {
    return new Cluster(clusterNodes(target.cluster), { ...clusterOptions, redisOptions: { ...clientOptions, ...nodeOptions(target) } })
  }
  if (target.sentinels !== undefined) {
    return new Redis({
      ...clientOptions,
      ...nodeOptions(target),
      lazyConnect: true,
      sentinels: clusterNodes(target.sentinels),
      name: target.sentinelMaster!,
      role: "master",
      // Told of a failover by the sentinels themselves (+switch-master), not only by a failing command.
      failoverDetector: true,
      ...dropUndefined({
        sentinelUsername: target.sentinelUsername,
        sentinelPassword: target.sentinelPassword === undefined ? undefined : Redacted.value(target.sentinelPassword),
        enableTLSForSentinelMode: target.tls !== undefined ? true : undefined,
        sentinelTLS: target.tls
      })
    })
  }
  return new Redis(target.url!, { ...clientOptions, ...nodeOptions(target), lazyConnect: true })
}

/**
 * Start-up waits at most this long for the registry's first connection (real time, as the
 * call timeout); past it Pinboard serves, and calls answer 503 until the client is ready.
 */
export const FIRST_CONNECT_WAIT_MS = 5_000

/**
 * Resolves once the client is ready, its first connection attempt failed, or the wait is
 * over. Not on `connect()` alone: when a Cluster client's first ready check fails (a master
 * has just died), ioredis reconnects on a promise of its own and never settles the one
 * `connect()` returned, though the client becomes ready.
 */
const firstConnect = (client: RedisClient): Promise<void> =>
  new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer)
      client.off("ready", done)
      resolve()
    }
    const timer = setTimeout(done, FIRST_CONNECT_WAIT_MS)
    client.once("ready", done)
    client.connect().then(done, done)
  })

/** How long one diagnosis of a Cluster without a known master stands before it is made again. */
const DIAGNOSIS_KEPT_MS = 5_000

/**
 * Why a Cluster client knows no master. ioredis keeps a failed ready check to itself (an ACL
 * user without CLUSTER INFO, say) and only retries; one plain connection to the first seed,
 * asked the same, says why. Made at most once per DIAGNOSIS_KEPT_MS.
 */
export const makeClusterDiagnosis = (target: RedisTarget): (() => Promise<unknown>) => {
  let kept: Promise<unknown> | undefined
  const diagnose = async (): Promise<unknown> => {
    const probe = new Redis({
      ...clientOptions,
      ...nodeOptions(target),
      ...clusterNodes(target.cluster ?? [])[0],
      lazyConnect: true,
      connectTimeout: REGISTRY_CALL_TIMEOUT_MS,
      retryStrategy: () => null
    })
    probe.on("error", () => undefined)
    try {
      await probe.connect()
      await probe.cluster("INFO")
      return new Error(NO_MASTER_KNOWN)
    } catch (error) {
      return error
    } finally {
      probe.disconnect()
    }
  }
  return () => {
    if (kept === undefined) {
      kept = diagnose()
      setTimeout(() => (kept = undefined), DIAGNOSIS_KEPT_MS).unref()
    }
    return kept
  }
}

/** How long after ioredis ends a client by itself it is connected again: its own longest retry delay. */
const RECONNECT_AFTER_END_MS = 1_000

/**
 * Connects the client again whenever it ends while still in use. ioredis ends a client for
 * good when a connection attempt is cut short: with Sentinels, its failover detector stops
 * the connector on +switch-master, and an attempt that was asking the sentinels for the
 * master at that moment fails with "Connection is closed" and never retries. Still so in
 * ioredis 6.1 (test/registry/RedisConnection.test.ts fails without this).
 */
const keepConnected = (client: RedisClient): { readonly release: () => void } => {
  let released = false
  let timer: ReturnType<typeof setTimeout> | undefined
  client.on("end", () => {
    if (released) return
    timer = setTimeout(() => {
      if (!released) client.connect().catch(() => undefined)
    }, RECONNECT_AFTER_END_MS)
  })
  return {
    release: () => {
      released = true
      clearTimeout(timer)
      client.disconnect()
    }
  }
}

/** A client with the scripts defined, connected (or reconnecting), disconnected when the scope closes. */
export const connectRedis = (target: RedisTarget, health?: RedisHealth) =>
  Effect.map(
    Effect.acquireRelease(
      Effect.promise(async () => {
        const client = newClient(target)
        // ioredis reconnects by itself; a connection's error is why the calls after it fail.
        client.on("error", (error: unknown) => health?.connectionFailed(error))
        client.on("node error", (error: unknown, node: unknown) => health?.connectionFailed(error, typeof node === "string" ? node : undefined))
        client.on("ready", () => health?.connected())
        const kept = keepConnected(client)
        defineScripts(client)
        await firstConnect(client)
        return { client, kept }
      }),
      ({ kept }) => Effect.sync(kept.release)
    ),
    ({ client }): RedisClient => client
  )
