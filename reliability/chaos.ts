// `npm run chaos`: Pinboard's promise under the faults real fleets meet (docs/reliability.md
// "Chaos"). A real registry (one redis-server, with --cluster a Redis Cluster of three
// masters with a replica each, with --sentinel a master and a replica under three Sentinels), two Pinboards and four counter workers on the worker library
// (every increment an epoch-fenced write to a storage redis-server), clients incrementing
// random ids and reading them back through both Pinboards, and faults on a seeded random
// schedule.
// Then every fault heals, every id must be served again within two leases, and the audit
// (reliability/chaos/audit.ts) reads the logs. Loopback only; stops by itself.
//
//   npm run chaos                                   1 minute
//   npm run chaos -- --minutes=10 --seed=7          the reported run
//   npm run chaos -- --cluster                      the registry on a Redis Cluster
//   npm run chaos -- --sentinel                     the registry on a master and a replica under Sentinels
//   npm run chaos -- --faults=clock-bump,clock-strobe,pause   only these faults
//   options: --minutes= --seed= --interval-ms= (between faults) --clients= --ids= --cluster --sentinel
//            --faults= (names of reliability/chaos/faults.ts FAULT_NAMES, comma-separated)
//            --no-faketime (the Pinboards on the real clock, as where libfaketime is missing)
//
// The Pinboards run under libfaketime when it is installed, for the clock faults; without it
// the run says so and leaves the clock faults out.
//
// Prints the figures; exits 1 when the audit finds a violation or ids do not recover.
import { readFileSync, writeFileSync } from "node:fs"
import { availableParallelism, loadavg } from "node:os"
import { join } from "node:path"
import { Redis } from "ioredis"
import { FencedStore } from "../src/worker/index.js"
import { stopAll, stopAllSync } from "../bench/processes.js"
import { answersDuring, audit, knownAnswers, type ClientRecord, type WorkerEvent } from "./chaos/audit.js"
import { findLibfaketime } from "./chaos/clock.js"
import { CLOCK_SEEN_WITHIN_MS, faultKinds, makeInjector, type FaultKind, type RegistryMode } from "./chaos/faults.js"
import { startFleet, type ChaosFleet } from "./chaos/fleet.js"
import { Rng } from "./prng.js"

const argv = process.argv.slice(2)
const option = (name: string, fallback: number): number => {
  const raw = argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
  const value = raw === undefined ? fallback : Number(raw)
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name}= expects a positive number`)
  return value
}
const MINUTES = option("minutes", 1)
const SEED = option("seed", 1)
const INTERVAL_MS = option("interval-ms", 1100)
const CLIENTS = option("clients", 16)
const IDS = Array.from({ length: option("ids", 100) }, (_, i) => `c${i}`)
const CLUSTER = argv.includes("--cluster")
const MODE: RegistryMode = CLUSTER ? "cluster" : argv.includes("--sentinel") ? "sentinel" : "single"
const NO_FAKETIME = argv.includes("--no-faketime")
/** `--faults=a,b`: only these kinds; undefined: every kind of the mode. */
const FAULTS = argv
  .find((a) => a.startsWith("--faults="))
  ?.slice("--faults=".length)
  .split(",")
  .map((name) => name.trim())
  .filter((name) => name !== "")
/**
 * docs/deploy.md asks for a lease of 5 s or more on a cluster: a heartbeat waits out a dead
 * shard's retries (about 0.8 s), and a failover must end within a lease less a heartbeat
 * interval for placements to survive it.
 */
const LEASE_MS = MODE === "single" ? 1500 : 5000
/** cluster-node-timeout: a killed master's replica takes over about 2.5 s after the kill. */
const NODE_TIMEOUT_MS = 1000
/**
 * The clients' limit: 8 s, or two leases and 2 s where that is longer. A request may wait a
 * lease on a SIGSTOPped worker, be refused when it resumes (its lease lapsed), be re-resolved
 * once onto a second stopped worker, and wait again: with a 5 s lease that is past 8 s.
 */
const REQUEST_TIMEOUT_MS = Math.max(8000, 2 * LEASE_MS + 2000)
const REGISTRY_DESCRIPTION: Readonly<Record<RegistryMode, string>> = {
  single: "one redis-server",
  cluster: `a Redis Cluster (3 masters, 1 replica each, cluster-node-timeout ${NODE_TIMEOUT_MS} ms)`,
  sentinel: "a master and a replica under 3 Sentinels (down after 1000 ms, quorum 2)"
}
/** Clients read a value back this often, instead of incrementing. */
const READ_SHARE = 0.25
/**
 * Whatever happens, the run ends by then: the faults' minutes, and six more for starting,
 * healing and the audit (starts alone took minutes on a loaded machine).
 */
const HARD_LIMIT_MS = MINUTES * 60_000 + 360_000

const log = (line: string) => process.stdout.write(`${line}\n`)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Client requests on their way through each Pinboard, for the pause to land among them. */
const inFlight = new Map<string, number>()

// ---- clients -----------------------------------------------------------------------------------

/** One increment (a POST whose body is a unique op), or a read of the value back. */
const call = async (pinboard: ChaosFleet["pinboards"][number], kind: ClientRecord["kind"], id: string, op: string): Promise<ClientRecord> => {
  const sentAt = Date.now()
  const via = pinboard.name
  const path = `/counters/${id}/${kind === "increment" ? "increment" : "value"}`
  inFlight.set(via, (inFlight.get(via) ?? 0) + 1)
  try {
    const response = await fetch(`http://127.0.0.1:${pinboard.port}${path}`, {
      method: kind === "increment" ? "POST" : "GET",
      ...(kind === "increment" ? { body: op } : {}),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
    })
    const body = await response.text()
    return { kind, op, id, path, via, sentAt, answeredAt: Date.now(), status: response.status, body }
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code
    return { kind, op, id, path, via, sentAt, answeredAt: Date.now(), error: cause ?? (error instanceof Error ? error.name : String(error)) }
  } finally {
    inFlight.set(via, inFlight.get(via)! - 1)
  }
}

const runClients = (fleet: ChaosFleet, rng: Rng, until: () => boolean, records: Array<ClientRecord>) =>
  Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      for (let n = 0; !until(); n++) {
        const pinboard = rng.pick(fleet.pinboards)
        const kind = rng.chance(READ_SHARE) ? "read" : "increment"
        const record = await call(pinboard, kind, rng.pick(IDS), `op-${client}-${n}`)
        records.push(record)
        // A Pinboard that is down refuses at once: do not spin on it.
        if (record.status === undefined) await sleep(50)
      }
    })
  )

// ---- recovery: every id served again, measured from the moment the last fault healed ------------

const recover = async (fleet: ChaosFleet, records: Array<ClientRecord>): Promise<{ worstMs: number; unrecovered: Array<string> }> => {
  const started = Date.now()
  const deadline = started + 4 * LEASE_MS + 10_000
  let worstMs = 0
  const unrecovered: Array<string> = []
  await Promise.all(
    IDS.map(async (id, i) => {
      const pinboard = fleet.pinboards[i % 2]!
      for (let n = 0; ; n++) {
        const record = await call(pinboard, "increment", id, `recovery-${id}-${n}`)
        records.push(record)
        if (record.status === 200) return void (worstMs = Math.max(worstMs, Date.now() - started))
        if (Date.now() > deadline) return void unrecovered.push(id)
        await sleep(50)
      }
    })
  )
  return { worstMs, unrecovered }
}

// ---- the run ---------------------------------------------------------------------------------

const readEvents = (fleet: ChaosFleet): Array<WorkerEvent> =>
  fleet.workers.flatMap((worker) => {
    let text = ""
    try {
      text = readFileSync(worker.logFile, "utf8")
    } catch {
      return []
    }
    // A SIGKILL can cut the last line short; everything before it was written whole.
    return text
      .split("\n")
      .filter((line) => line.endsWith("}"))
      .map((line) => JSON.parse(line) as WorkerEvent)
  })

const finalValues = async (fleet: ChaosFleet): Promise<Map<string, number>> => {
  const client = new Redis(fleet.storage.url)
  const store = new FencedStore(client, { prefix: "chaos" })
  const values = new Map<string, number>()
  for (const id of IDS) {
    const stored = await store.read(`/counters/${id}`)
    values.set(id, stored === undefined ? 0 : Number(stored.value.toString()))
  }
  client.disconnect()
  return values
}

/** For exit paths that cannot wait: the redis-servers are not node processes of bench/processes.ts. */
let running: ChaosFleet | undefined
const stopRedisSync = () => running?.stopSync()

const main = async (): Promise<boolean> => {
  const rng = new Rng(SEED)
  const faketime = NO_FAKETIME ? { missing: "--no-faketime" } : findLibfaketime()
  const kinds = faultKinds(MODE, FAULTS, "lib" in faketime)
  if (kinds.length === 0) throw new Error(`no fault left to inject (--faults=${FAULTS?.join(",")}, and no clock faults: ${"missing" in faketime ? faketime.missing : ""})`)
  log(
    `chaos: ${MINUTES} min of faults, seed ${SEED}, a fault every ~${INTERVAL_MS} ms, ${CLIENTS} clients on ${IDS.length} ids, ` +
      `registry on ${REGISTRY_DESCRIPTION[MODE]}, lease ${LEASE_MS} ms`
  )
  log(
    "lib" in faketime
      ? `Pinboards under ${faketime.lib} (wall clock movable, monotonic clock real)`
      : `no clock faults: ${faketime.missing}`
  )
  if (FAULTS !== undefined) log(`faults: ${kinds.join(", ")}`)
  const fleet = await startFleet({
    leaseMs: LEASE_MS,
    workers: 4,
    idleMs: 3000,
    portClosedMs: 1500,
    registry: MODE,
    nodeTimeoutMs: NODE_TIMEOUT_MS,
    libfaketime: "lib" in faketime ? faketime.lib : undefined
  })
  running = fleet
  const registry =
    fleet.registry.mode === "single"
      ? `redis :${fleet.registry.port}`
      : fleet.registry.mode === "cluster"
        ? `cluster ${fleet.registry.cluster.seeds}`
        : `sentinels ${fleet.registry.set.sentinels}, master :${fleet.registry.set.masterPort}, replica :${fleet.registry.set.replicaPort}`
  log(`fleet up in ${fleet.dir}: registry ${registry}, storage redis :${fleet.storage.port}, pinboards :${fleet.pinboards.map((p) => p.port).join(" :")}`)

  // Past the registry's cold start before the faults begin.
  await sleep(LEASE_MS + 500)
  const records: Array<ClientRecord> = []
  const injector = makeInjector(fleet, { leaseMs: LEASE_MS, rng, kinds, inFlight: (name) => inFlight.get(name) ?? 0, log: (line) => log(`  ${line}`) })
  const faults = new Map<FaultKind, number>(injector.kinds.map((kind) => [kind, 0]))
  const endAt = Date.now() + MINUTES * 60_000
  let faultsOver = false
  const clients = runClients(fleet, new Rng(SEED + 1), () => faultsOver, records)

  let lastReport = Date.now()
  /** The machine's 1-minute load average every 30 s: figures from a machine busy with other work read differently. */
  const loads: Array<number> = []
  while (Date.now() < endAt) {
    const kind = injector.inject()
    if (kind !== undefined) faults.set(kind, faults.get(kind)! + 1)
    await sleep(rng.range(INTERVAL_MS / 2, (INTERVAL_MS * 3) / 2))
    if (Date.now() - lastReport > 30_000) {
      lastReport = Date.now()
      const total = [...faults.values()].reduce((a, b) => a + b, 0)
      const load = loadavg()[0]!
      loads.push(load)
      log(`  ${Math.round((endAt - Date.now()) / 1000)} s left: ${total} faults, ${records.length} requests, load average ${load.toFixed(1)}`)
    }
  }
  log("faults stop; healing")
  await injector.healed()
  faultsOver = true
  await clients
  const recovery = await recover(fleet, records)

  // The faults' timeline, beside the workers' logs, to read problems against.
  writeFileSync(
    join(fleet.dir, "faults.log"),
    [...injector.windows].sort((a, b) => a.from - b.from).map((w) => `${w.from} ${w.to} ${w.target} ${w.kind}\n`).join("")
  )
  const windowsOf = (kind: FaultKind) => injector.windows.filter((w) => w.kind === kind)
  const result = audit({
    events: readEvents(fleet),
    clients: records,
    finalValues: await finalValues(fleet),
    known: knownAnswers,
    pinboardDowns: windowsOf("Pinboard killed, restarted"),
    clientsLeft: fleet.clientsLeft,
    // One redis-server's wipes. A cluster master's FLUSHALL wipes one shard's buckets only:
    // the audit cannot tell its ids.
    registryWipes: injector.wipes.map((w) => ({ target: "redis", ...w })),
    leaseMs: LEASE_MS
  })
  const totalFaults = [...faults.values()].reduce((a, b) => a + b, 0)
  log("")
  log(`faults injected: ${totalFaults}`)
  for (const [kind, n] of faults) log(`  ${kind.padEnd(32)} ${n}`)
  if (loads.length > 0) log(`load average (1 min, every 30 s): ${Math.min(...loads).toFixed(1)} to ${Math.max(...loads).toFixed(1)} on ${availableParallelism()} cores`)
  log(`requests: ${result.requests}`)
  log(`acknowledged writes: ${result.acknowledged} (accepted by the store: ${result.acceptedWrites}; activations: ${result.activations})`)
  log(`double activations: ${result.doubleActivations}`)
  log(`lost acknowledged writes: ${result.lostAcknowledged}`)
  log(`reads: ${result.reads}; stale reads (below a value acknowledged before the read): ${result.staleReads}`)
  log(`replayed bodies: ${result.replayedBodies}`)
  if (MODE === "single") log(`placements inside a cold start (an activation within a lease of a registry wipe, for a request sent after it): ${result.coldStartPlacements}`)
  log(`epochs backwards (a request sent after a newer epoch of its id was seen, delivered at an older one)${MODE === "cluster" ? ", not a failure on a cluster (a failover can lose the last writes)" : ""}: ${result.epochsBackwards}`)
  log(`unknown errors: ${result.unknownErrors}`)
  log(`hangs (no answer within ${REQUEST_TIMEOUT_MS} ms): ${result.hangs}`)
  log(`requests without an answer from a Pinboard that was up: ${result.unansweredWhileUp}`)
  log(`late owners (requests an activation took after a newer epoch of its id activated on another worker; not a failure): ${result.lateOwners}`)
  if (injector.unhealed.length > 0) log(`faults that did not heal: ${injector.unhealed.join(", ")}`)
  if (injector.failovers.length > 0) {
    const sorted = [...injector.failovers].sort((a, b) => a - b)
    log(`failovers: ${sorted.length}, a master again after ${sorted[0]}-${sorted[sorted.length - 1]} ms (median ${sorted[Math.floor(sorted.length / 2)]} ms)`)
  }
  const cut = answersDuring(records, windowsOf("Pinboard cut from Redis"))
  if (cut.requests > 0) {
    log(`answers of a Pinboard while cut from Redis: ${cut.requests} requests (count, slowest, answer)`)
    for (const [answer, { count, slowestMs }] of [...cut.answers].sort((a, b) => b[1].count - a[1].count)) {
      log(`  ${String(count).padStart(7)} ${`${slowestMs} ms`.padStart(9)}  ${answer}`)
    }
  }
  const clockWindows = windowsOf("Pinboard clock bumped forward").concat(windowsOf("Pinboard clock bumped back"), windowsOf("Pinboard clock strobed"))
  if (injector.clockChecks.length > 0) {
    const seen = injector.clockChecks.filter((c) => c.seenMs !== undefined)
    const asSet = seen.filter((c) => Math.abs(c.seenMs! - c.setMs) <= CLOCK_SEEN_WITHIN_MS)
    log(
      `clock offsets set: ${injector.clockChecks.length} (strobe steps included); the replica's log lines showed ${seen.length} of them, ` +
        `${asSet.length} within ${CLOCK_SEEN_WITHIN_MS} ms of the offset set`
    )
  }
  for (const [what, windows] of [
    ["a Pinboard while its clock was off", clockWindows],
    ["a Pinboard SIGSTOPped", windowsOf("Pinboard SIGSTOP past a lease")]
  ] as const) {
    const during = answersDuring(records, windows)
    if (during.requests === 0) continue
    log(`answers of ${what}: ${during.requests} requests (count, slowest, answer)`)
    for (const [answer, { count, slowestMs }] of [...during.answers].sort((a, b) => b[1].count - a[1].count)) {
      log(`  ${String(count).padStart(7)} ${`${slowestMs} ms`.padStart(9)}  ${answer}`)
    }
  }
  if (injector.pauses.length > 0) {
    // Requests sent before a SIGSTOP and answered after its SIGCONT, and those of them a worker
    // had delivered after the SIGCONT: forwarded by the Pinboard once it ran again.
    const deliveredAt = new Map<string, number>()
    for (const event of readEvents(fleet)) if (event.ev === "deliver") deliveredAt.set(event.op, event.t)
    let held = 0
    let forwardedAfter = 0
    for (const pause of injector.pauses) {
      for (const record of records) {
        if (record.via !== pause.target || record.sentAt > pause.stoppedAt || record.answeredAt < pause.continuedAt) continue
        held++
        if ((deliveredAt.get(record.op) ?? 0) >= pause.continuedAt) forwardedAfter++
      }
    }
    const lengths = injector.pauses.map((p) => p.continuedAt - p.stoppedAt)
    log(
      `Pinboard pauses: ${injector.pauses.length} of ${Math.min(...lengths)}-${Math.max(...lengths)} ms; requests in flight at the SIGSTOP: ` +
        `${injector.pauses.map((p) => p.inFlight).join(" ")}; held over a pause: ${held}, delivered to a worker after the SIGCONT: ${forwardedAfter}`
    )
  }
  log(`worst recovery time: ${recovery.worstMs} ms (two leases: ${2 * LEASE_MS} ms)${recovery.unrecovered.length > 0 ? `; NOT recovered: ${recovery.unrecovered.join(" ")}` : ""}`)
  log("answers other than 200:")
  for (const [answer, n] of [...result.answers].sort((a, b) => b[1] - a[1])) log(`  ${String(n).padStart(7)}  ${answer}`)
  log("requests without an answer (a Pinboard down, a connection reset):")
  for (const [error, n] of [...result.unanswered].sort((a, b) => b[1] - a[1])) log(`  ${String(n).padStart(7)}  ${error}`)
  for (const line of result.lateOwnerLines.slice(0, 20)) log(`LATE OWNER ${line}`)
  for (const problem of result.problems.slice(0, 50)) log(`PROBLEM ${problem}`)

  const ok =
    result.doubleActivations === 0 &&
    result.lostAcknowledged === 0 &&
    result.staleReads === 0 &&
    result.replayedBodies === 0 &&
    result.coldStartPlacements === 0 &&
    (MODE === "cluster" || result.epochsBackwards === 0) &&
    result.unknownErrors === 0 &&
    result.hangs === 0 &&
    result.unansweredWhileUp === 0 &&
    injector.unhealed.length === 0 &&
    recovery.unrecovered.length === 0 &&
    recovery.worstMs <= 2 * LEASE_MS
  log(ok ? "PASS" : "FAIL")
  await fleet.stop()
  return ok
}

const limit = setTimeout(() => {
  log(`chaos: hard limit of ${HARD_LIMIT_MS / 1000} s reached; stopping`)
  stopAllSync()
  stopRedisSync()
  process.exit(1)
}, HARD_LIMIT_MS)
limit.unref()
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    stopAllSync()
    stopRedisSync()
    process.exit(130)
  })
}

main()
  .then(async (ok) => {
    await stopAll()
    process.exit(ok ? 0 : 1)
  })
  .catch(async (error: unknown) => {
    log(`chaos: broken: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
    await stopAll()
    stopRedisSync()
    process.exit(1)
  })
