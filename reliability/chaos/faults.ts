// The faults of the chaos run, injected on a seeded schedule. Each fault heals itself (a
// restart, a SIGCONT, a link that comes back, a replica promoted, a clock set right); a target
// under a fault is not picked again until it has healed, and only one Pinboard is under a fault
// at a time, so the other one serves.
import { Redis } from "ioredis"
import { startRedisServer } from "../../test/support/RedisServer.js"
import { PICKUP_MS, type ReplicaClock } from "./clock.js"
import { ADMIN } from "../../test/support/SecureRedis.js"
import type { ChaosFleet, ClusterRegistry, Restartable, SentinelRegistry, SingleRegistry } from "./fleet.js"
import type { Rng } from "../prng.js"

const WORKER_FAULTS = ["worker SIGKILL", "worker SIGSTOP past its lease", "heartbeats dropped", "worker port closed"] as const

/** The faults that move a Pinboard's wall clock: they need libfaketime (reliability/chaos/clock.ts). */
export const CLOCK_FAULT_KINDS = ["Pinboard clock bumped forward", "Pinboard clock bumped back", "Pinboard clock strobed"] as const

/** The faults on a Pinboard, in both modes. */
const PINBOARD_FAULTS = ["Pinboard killed, restarted", ...CLOCK_FAULT_KINDS, "Pinboard SIGSTOP past a lease"] as const

/** The faults on one redis-server. */
export const SINGLE_FAULT_KINDS = [
  ...WORKER_FAULTS,
  "Redis FLUSHALL",
  "Redis killed, restarted empty",
  ...PINBOARD_FAULTS,
  "Pinboard cut from Redis"
] as const

/**
 * The faults on a Redis Cluster. A Pinboard's cluster connection cannot go through a link:
 * ioredis connects to the nodes the cluster announces, and Pinboard has no address mapping.
 */
export const CLUSTER_FAULT_KINDS = [
  ...WORKER_FAULTS,
  "cluster master FLUSHALL",
  "cluster master killed, replica takes over",
  ...PINBOARD_FAULTS
] as const

/** The faults on a master and a replica under three Sentinels. */
export const SENTINEL_FAULT_KINDS = [...WORKER_FAULTS, "Sentinel master killed, replica promoted", ...PINBOARD_FAULTS] as const

export type FaultKind = (typeof SINGLE_FAULT_KINDS)[number] | (typeof CLUSTER_FAULT_KINDS)[number] | (typeof SENTINEL_FAULT_KINDS)[number]

export type RegistryMode = "single" | "cluster" | "sentinel"

const MODE_KINDS: Readonly<Record<RegistryMode, ReadonlyArray<FaultKind>>> = {
  single: SINGLE_FAULT_KINDS,
  cluster: CLUSTER_FAULT_KINDS,
  sentinel: SENTINEL_FAULT_KINDS
}

const MODE_NAMES: Readonly<Record<RegistryMode, string>> = { single: "on one redis-server", cluster: "with --cluster", sentinel: "with --sentinel" }

/** The short names `--faults=` takes. */
export const FAULT_NAMES: Readonly<Record<FaultKind, string>> = {
  "worker SIGKILL": "worker-kill",
  "worker SIGSTOP past its lease": "worker-stop",
  "heartbeats dropped": "heartbeats-dropped",
  "worker port closed": "port-closed",
  "Redis FLUSHALL": "redis-flushall",
  "Redis killed, restarted empty": "redis-killed",
  "Pinboard killed, restarted": "pinboard-killed",
  "Pinboard cut from Redis": "pinboard-cut",
  "cluster master FLUSHALL": "master-flushall",
  "cluster master killed, replica takes over": "failover",
  "Sentinel master killed, replica promoted": "sentinel-failover",
  "Pinboard clock bumped forward": "clock-forward",
  "Pinboard clock bumped back": "clock-back",
  "Pinboard clock strobed": "clock-strobe",
  "Pinboard SIGSTOP past a lease": "pause"
}

/** Names for several kinds at once. */
const FAULT_GROUPS: Readonly<Record<string, ReadonlyArray<FaultKind>>> = {
  "clock-bump": ["Pinboard clock bumped forward", "Pinboard clock bumped back"],
  clock: CLOCK_FAULT_KINDS
}

/**
 * The kinds a run draws from: the mode's, those `--faults=` names (all when it is absent), less
 * the clock faults when there is no libfaketime. Throws on a name that is not a kind of the mode.
 */
export const faultKinds = (mode: RegistryMode, names: ReadonlyArray<string> | undefined, faketime: boolean): ReadonlyArray<FaultKind> => {
  const modeKinds = MODE_KINDS[mode]
  let chosen = modeKinds
  if (names !== undefined) {
    const wanted = new Set<FaultKind>()
    for (const name of names) {
      const kinds = FAULT_GROUPS[name] ?? modeKinds.filter((kind) => FAULT_NAMES[kind] === name)
      if (kinds.length === 0) {
        const all = Object.values(FAULT_NAMES).includes(name)
        throw new Error(
          all
            ? `--faults=${name} does not apply ${MODE_NAMES[mode]}`
            : `--faults=: unknown fault ${JSON.stringify(name)}; the faults are ${[...modeKinds.map((kind) => FAULT_NAMES[kind]), ...Object.keys(FAULT_GROUPS)].join(", ")}`
        )
      }
      for (const kind of kinds) wanted.add(kind)
    }
    chosen = modeKinds.filter((kind) => wanted.has(kind))
  }
  if (!faketime) chosen = chosen.filter((kind) => !(CLOCK_FAULT_KINDS as ReadonlyArray<FaultKind>).includes(kind))
  return chosen
}

/** What a clock fault's replica showed of its clock: the `time` of its log lines against ours. */
export interface ClockCheck {
  readonly kind: FaultKind
  readonly target: string
  /** The offset set (ms). */
  readonly setMs: number
  /** The offset its lines showed once the replica had read the file (ms), or undefined if no line came. */
  readonly seenMs: number | undefined
}

/** A Pinboard SIGSTOPped: when, for how long, and how many client requests were on their way through it. */
export interface Pause {
  readonly target: string
  readonly stoppedAt: number
  readonly continuedAt: number
  readonly inFlight: number
}

/** When a fault held its target: from its start to its heal (ms). */
export interface FaultWindow {
  readonly kind: FaultKind
  readonly target: string
  readonly from: number
  readonly to: number
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The user a node is asked as where the default user is off (the Sentinel set's nodes). */
type NodeUser = { readonly user: string; readonly password: string } | undefined

const nodeClient = (port: number, as: NodeUser) =>
  new Redis(port, "127.0.0.1", {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    ...(as === undefined ? {} : { username: as.user, password: as.password })
  })

const replicationOf = async (port: number, as?: NodeUser): Promise<string> => {
  const client = nodeClient(port, as)
  client.on("error", () => undefined)
  try {
    await client.connect()
    return await client.info("replication")
  } catch {
    return ""
  } finally {
    client.disconnect()
  }
}

/**
 * Resolves once the node on `port` reports `pattern` in INFO replication. Asked over a
 * connection, not with redis-cli: a process every 25 ms weighs on a loaded machine.
 */
const waitReplication = async (port: number, pattern: RegExp, what: string, as?: NodeUser): Promise<string> => {
  const deadline = Date.now() + 30_000
  for (;;) {
    const info = await replicationOf(port, as)
    if (pattern.test(info)) return info
    if (Date.now() > deadline) throw new Error(`:${port} ${what} within 30 s`)
    await sleep(25)
  }
}

const signal = (proc: Restartable, name: NodeJS.Signals) => {
  try {
    process.kill(proc.current.pid, name)
  } catch {
    // gone already
  }
}

export interface Injector {
  readonly kinds: ReadonlyArray<FaultKind>
  /** Starts one fault if a target is free; its kind, or undefined when none could start. */
  readonly inject: () => FaultKind | undefined
  /** Resolves once every fault started has healed. */
  readonly healed: () => Promise<void>
  /** The faults over so far. */
  readonly windows: ReadonlyArray<FaultWindow>
  /** Faults that failed to heal (a run with any fails). */
  readonly unhealed: ReadonlyArray<FaultKind>
  /** How long each killed master's replica took to be promoted (ms). */
  readonly failovers: ReadonlyArray<number>
  /** For every clock fault (every step of a strobe), the offset set and the offset its replica's log lines showed. */
  readonly clockChecks: ReadonlyArray<ClockCheck>
  /** Every Pinboard SIGSTOP. */
  readonly pauses: ReadonlyArray<Pause>
  /**
   * Every wipe of one redis-server: from just before the FLUSHALL was sent or the empty server
   * spawned (the registry cannot be used empty before), to when it was done.
   */
  readonly wipes: ReadonlyArray<{ readonly from: number; readonly to: number }>
}

export interface InjectorOptions {
  readonly leaseMs: number
  readonly rng: Rng
  /** What is drawn from (faultKinds). */
  readonly kinds: ReadonlyArray<FaultKind>
  /** How many client requests are on their way through the Pinboard so named. */
  readonly inFlight: (pinboard: string) => number
  readonly log: (line: string) => void
}

/** A clock's offset as its replica's lines show it matches the one set when within this (ms). */
export const CLOCK_SEEN_WITHIN_MS = 500

export const makeInjector = (fleet: ChaosFleet, { leaseMs, rng, kinds, inFlight, log }: InjectorOptions): Injector => {
  if (kinds.length === 0) throw new Error("no fault kind to draw from")
  const busy = new Set<string>()
  const healing = new Set<Promise<void>>()
  const windows: Array<FaultWindow> = []
  const unhealed: Array<FaultKind> = []
  const failovers: Array<number> = []
  const clockChecks: Array<ClockCheck> = []
  const pauses: Array<Pause> = []
  const wipes: Array<{ from: number; to: number }> = []
  const registry = fleet.registry

  const run = (kind: FaultKind, target: string, fault: () => Promise<void>) => {
    busy.add(target)
    const from = Date.now()
    const healed = fault()
      .catch((error: unknown) => {
        unhealed.push(kind)
        log(`${kind} on ${target} failed to heal: ${error instanceof Error ? error.message : String(error)}`)
      })
      .finally(() => {
        windows.push({ kind, target, from, to: Date.now() })
        busy.delete(target)
        healing.delete(healed)
      })
    healing.add(healed)
  }

  const freeWorkers = () => fleet.workers.filter((w) => !busy.has(w.name))
  // Keep two workers untouched, so that ids always have somewhere to go.
  const workerFaultAllowed = () => fleet.workers.length - freeWorkers().length < fleet.workers.length - 2

  const attempt = (kind: FaultKind): boolean => {
    switch (kind) {
      case "worker SIGKILL":
      case "worker SIGSTOP past its lease":
      case "heartbeats dropped":
      case "worker port closed": {
        const candidates = freeWorkers()
        if (candidates.length === 0 || !workerFaultAllowed()) return false
        const worker = rng.pick(candidates)
        const downMs = rng.range(300, 1000)
        const pastLeaseMs = leaseMs + rng.range(300, 800)
        if (kind === "worker SIGKILL") {
          run(kind, worker.name, async () => {
            signal(worker, "SIGKILL")
            await worker.current.exited
            await sleep(downMs)
            await worker.start()
          })
        } else if (kind === "worker SIGSTOP past its lease") {
          run(kind, worker.name, async () => {
            signal(worker, "SIGSTOP")
            await sleep(pastLeaseMs)
            signal(worker, "SIGCONT")
          })
        } else if (kind === "heartbeats dropped") {
          run(kind, worker.name, async () => {
            worker.link.cut(pastLeaseMs)
            await sleep(pastLeaseMs)
          })
        } else {
          run(kind, worker.name, async () => {
            signal(worker, "SIGUSR1")
            await sleep(1600)
          })
        }
        return true
      }
      case "Redis FLUSHALL":
      case "Redis killed, restarted empty":
        return registry.mode === "single" && !busy.has("redis") && singleRedisFault(kind, registry)
      case "cluster master FLUSHALL":
      case "cluster master killed, replica takes over":
        return registry.mode === "cluster" && !busy.has("cluster") && clusterFault(kind, registry)
      case "Sentinel master killed, replica promoted":
        return registry.mode === "sentinel" && !busy.has("sentinel") && sentinelFault(kind, registry)
      case "Pinboard killed, restarted": {
        if (fleet.pinboards.some((p) => busy.has(p.name))) return false
        const pinboard = rng.pick(fleet.pinboards)
        run(kind, pinboard.name, async () => {
          signal(pinboard, "SIGKILL")
          await pinboard.current.exited
          await pinboard.start()
        })
        return true
      }
      case "Pinboard clock bumped forward":
      case "Pinboard clock bumped back":
      case "Pinboard clock strobed": {
        // Two leases: far past the margins a lease keeps, so a replica that trusts its own
        // wall clock judges every lease wrong (expired ones alive, or live ones expired).
        if (fleet.pinboards.some((p) => busy.has(p.name))) return false
        const pinboard = rng.pick(fleet.pinboards)
        const clock = pinboard.clock
        if (clock === undefined) return false
        const offMs = 2 * leaseMs
        if (kind === "Pinboard clock strobed") {
          // Every 1.2 to 1.6 s (libfaketime reads its file within a second, so every step
          // is read), +2 leases, -2 leases, the real clock, in turn from a drawn start, for 4
          // to 6 steps; then the real clock.
          const cycle = [offMs, -offMs, 0]
          const start = rng.int(cycle.length)
          const steps = Array.from({ length: rng.range(4, 6) }, (_, i) => ({ offsetMs: cycle[(start + i) % cycle.length]!, ms: rng.range(1200, 1600) }))
          run(kind, pinboard.name, async () => {
            try {
              for (const step of steps) {
                const setAt = Date.now()
                clock.set(step.offsetMs)
                await sleep(step.ms)
                checkClock(kind, pinboard.name, clock, setAt)
              }
            } finally {
              await heal(clock)
            }
          })
        } else {
          // For 2 to 4 leases once the replica has read its file.
          const holdMs = rng.range(2 * leaseMs, 4 * leaseMs)
          const offsetMs = kind === "Pinboard clock bumped forward" ? offMs : -offMs
          run(kind, pinboard.name, async () => {
            try {
              const setAt = Date.now()
              clock.set(offsetMs)
              await sleep(PICKUP_MS + holdMs)
              checkClock(kind, pinboard.name, clock, setAt)
            } finally {
              await heal(clock)
            }
          })
        }
        return true
      }
      case "Pinboard SIGSTOP past a lease": {
        // A Pinboard paused (a GC pause, a VM paused, SIGSTOP) past a lease while client
        // requests are on their way through it: some have their placement and not yet their
        // forward, which they send after the SIGCONT, a lease or more later, when the placement
        // may have moved on. The workers heartbeating through it miss their heartbeats too.
        if (fleet.pinboards.some((p) => busy.has(p.name))) return false
        const pinboard = rng.pick(fleet.pinboards)
        const pauseMs = leaseMs + rng.range(1000, 1500)
        run(kind, pinboard.name, async () => {
          // Wait (up to 2 s) for two requests in flight through it, then stop it at once.
          const deadline = Date.now() + 2000
          while (inFlight(pinboard.name) < 2 && Date.now() < deadline) await sleep(1)
          const held = inFlight(pinboard.name)
          signal(pinboard, "SIGSTOP")
          const stoppedAt = Date.now()
          try {
            await sleep(pauseMs)
          } finally {
            signal(pinboard, "SIGCONT")
            pauses.push({ target: pinboard.name, stoppedAt, continuedAt: Date.now(), inFlight: held })
          }
        })
        return true
      }
      case "Pinboard cut from Redis": {
        // One Pinboard under a fault at a time, so the other one serves throughout.
        if (fleet.pinboards.some((p) => busy.has(p.name))) return false
        const pinboard = rng.pick(fleet.pinboards)
        const link = pinboard.redisLink
        if (link === undefined) return false
        // Past a lease and a half: the leases of the workers heartbeating through this
        // Pinboard lapse, the other Pinboard places their ids anew, and this one comes back to
        // a registry that moved on without it. At most two and a half, well within the
        // clients' 8 s timeout. Half the cuts reset the connection (ioredis sees it closed and
        // reconnects), half stall it (a partition: every call waits out its 1 s limit, and the
        // held calls reach Redis late, at the heal).
        const cutMs = rng.range(1.5 * leaseMs, 2.5 * leaseMs)
        const stall = rng.chance(0.5)
        run(kind, pinboard.name, async () => {
          if (stall) link.stall(cutMs)
          else link.cut(cutMs)
          await sleep(cutMs)
        })
        return true
      }
    }
  }

  /** Sets the replica's clock right and waits until it has read so. */
  const heal = async (clock: ReplicaClock) => {
    clock.set(0)
    await sleep(PICKUP_MS)
  }

  /** What the replica's lines showed of the offset set at `setAt`, from a line after it must have been read. */
  const checkClock = (kind: FaultKind, target: string, clock: ReplicaClock, setAt: number) => {
    const sample = clock.observed()
    const setMs = clock.offsetMs()
    // libfaketime reads the file within its second of cache: a line sampled later shows the offset.
    const seenMs = sample !== undefined && sample.at >= setAt + 1050 ? sample.offsetMs : undefined
    clockChecks.push({ kind, target, setMs, seenMs })
    if (seenMs !== undefined && Math.abs(seenMs - setMs) > CLOCK_SEEN_WITHIN_MS) log(`${kind} on ${target}: offset ${setMs} ms set, its log lines showed ${seenMs} ms`)
  }

  const singleRedisFault = (kind: FaultKind, registry: SingleRegistry): boolean => {
    if (kind === "Redis FLUSHALL") {
      run(kind, "redis", async () => {
        const client = new Redis(registry.port, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 1 })
        try {
          await client.connect()
          const from = Date.now()
          await client.flushall()
          wipes.push({ from, to: Date.now() })
        } finally {
          client.disconnect()
        }
      })
    } else {
      const downMs = rng.range(200, 800)
      run(kind, "redis", async () => {
        await registry.server.stop()
        await sleep(downMs)
        const from = Date.now()
        registry.server = await startRedisServer(registry.port)
        wipes.push({ from, to: Date.now() })
      })
    }
    return true
  }

  // One cluster fault at a time: a master is killed only once its replica has caught up,
  // and the killed node is back as a synced replica before the next one.
  const clusterFault = (kind: FaultKind, { cluster }: ClusterRegistry): boolean => {
    // Drawn now, so the schedule does not depend on how long the cluster takes to answer.
    const which = rng.float()
    const downMs = rng.range(200, 800)
    run(kind, "cluster", async () => {
      const masters = await cluster.masters()
      const master = masters[Math.floor(which * masters.length)]!
      if (kind === "cluster master FLUSHALL") {
        // The replica follows: the shard's buckets are wiped.
        await cluster.cli(master, "FLUSHALL")
        return
      }
      const replica = await cluster.syncedReplicaOf(master)
      const killedAt = Date.now()
      await cluster.kill(master)
      try {
        // No CLUSTER FAILOVER: the replica is promoted by the cluster itself once the master
        // has been silent for cluster-node-timeout.
        await waitReplication(replica, /^role:master/m, "was not promoted")
        failovers.push(Date.now() - killedAt)
      } finally {
        await sleep(downMs)
        // Restarted on its nodes.conf, empty: it learns that its slots moved and follows the new master.
        await cluster.restart(master)
      }
      const info = await waitReplication(master, /^master_link_status:up/m, "did not sync with a master")
      const following = Number(/^master_port:(\d+)/m.exec(info)?.[1])
      if (following !== replica) log(`restarted :${master} follows :${following}, not :${replica}`)
    })
    return true
  }

  // One failover at a time: the master is killed once its replica has what it wrote, promoted
  // by the sentinels, and the killed node is back as the new master's synced replica before the
  // next one.
  const sentinelFault = (kind: FaultKind, { set }: SentinelRegistry): boolean => {
    const downMs = rng.range(200, 800)
    run(kind, "sentinel", async () => {
      const master = set.currentMasterPort()
      if (master === undefined) throw new Error("the sentinels name no master")
      const replica = master === set.masterPort ? set.replicaPort : set.masterPort
      await waitReplication(replica, /^master_link_status:up/m, "was not in sync", ADMIN)
      const client = nodeClient(master, ADMIN)
      client.on("error", () => undefined)
      await client.connect().then(() => client.call("WAIT", "1", "2000")).finally(() => client.disconnect())
      const killedAt = Date.now()
      await set.kill(master)
      try {
        await waitReplication(replica, /^role:master/m, "was not promoted", ADMIN)
        failovers.push(Date.now() - killedAt)
      } finally {
        await sleep(downMs)
        // Back empty, as a master: the sentinels make it a replica of the new one.
        await set.restart(master)
      }
      await waitReplication(master, /^master_link_status:up/m, "did not sync with the new master", ADMIN)
    })
    return true
  }

  return {
    kinds,
    inject: () => {
      const kind = rng.pick(kinds)
      return attempt(kind) ? kind : undefined
    },
    windows,
    unhealed,
    failovers,
    clockChecks,
    pauses,
    wipes,
    healed: async () => {
      while (healing.size > 0) await Promise.all([...healing])
    }
  }
}
