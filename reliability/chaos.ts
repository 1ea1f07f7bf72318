// `npm run chaos`: Pinboard's promise under the faults real fleets meet (docs/reliability.md
// "Chaos"). A real registry redis-server, two Pinboards and four counter workers on the
// worker library (every increment an epoch-fenced write to a storage redis-server), clients
// incrementing random ids and reading them back through both Pinboards, and faults on a
// seeded random schedule.
// Then every fault heals, every id must be served again within two leases, and the audit
// (reliability/chaos/audit.ts) reads the logs. Loopback only; stops by itself.
//
//   npm run chaos                                   1 minute
//   npm run chaos -- --minutes=10 --seed=7          the reported run
//   options: --minutes= --seed= --interval-ms= (between faults) --clients= --ids=
//
// Prints the figures; exits 1 when the audit finds a violation or ids do not recover.
import { readFileSync } from "node:fs"
import { Redis } from "ioredis"
import { FencedStore } from "../src/worker/index.js"
import { stopAll, stopAllSync } from "../bench/processes.js"
import { audit, knownAnswers, type ClientRecord, type WorkerEvent } from "./chaos/audit.js"
import { FAULT_KINDS, makeInjector, type FaultKind } from "./chaos/faults.js"
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
const LEASE_MS = 1500
const REQUEST_TIMEOUT_MS = 8000
/** Clients read a value back this often, instead of incrementing. */
const READ_SHARE = 0.25
/** Whatever happens, the run ends by then. */
const HARD_LIMIT_MS = MINUTES * 60_000 + 180_000

const log = (line: string) => process.stdout.write(`${line}\n`)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

// ---- clients -----------------------------------------------------------------------------------

/** One increment (a POST whose body is a unique op), or a read of the value back. */
const call = async (origin: string, kind: ClientRecord["kind"], id: string, op: string): Promise<ClientRecord> => {
  const sentAt = Date.now()
  try {
    const response = await fetch(`${origin}/counters/${id}/${kind === "increment" ? "increment" : "value"}`, {
      method: kind === "increment" ? "POST" : "GET",
      ...(kind === "increment" ? { body: op } : {}),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
    })
    const body = await response.text()
    return { kind, op, id, sentAt, answeredAt: Date.now(), status: response.status, body }
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code
    return { kind, op, id, sentAt, answeredAt: Date.now(), error: cause ?? (error instanceof Error ? error.name : String(error)) }
  }
}

const runClients = (fleet: ChaosFleet, rng: Rng, until: () => boolean, records: Array<ClientRecord>) =>
  Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      for (let n = 0; !until(); n++) {
        const pinboard = rng.pick(fleet.pinboards)
        const kind = rng.chance(READ_SHARE) ? "read" : "increment"
        const record = await call(`http://127.0.0.1:${pinboard.port}`, kind, rng.pick(IDS), `op-${client}-${n}`)
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
        const record = await call(`http://127.0.0.1:${pinboard.port}`, "increment", id, `recovery-${id}-${n}`)
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
const stopRedisSync = () => {
  running?.registry.stopSync()
  running?.storage.stopSync()
}

const main = async (): Promise<boolean> => {
  const rng = new Rng(SEED)
  log(`chaos: ${MINUTES} min of faults, seed ${SEED}, a fault every ~${INTERVAL_MS} ms, ${CLIENTS} clients on ${IDS.length} ids, lease ${LEASE_MS} ms`)
  const fleet = await startFleet({ leaseMs: LEASE_MS, workers: 4, idleMs: 3000, portClosedMs: 1500 })
  running = fleet
  log(`fleet up in ${fleet.dir}: registry redis :${fleet.registryPort}, storage redis :${fleet.storage.port}, pinboards :${fleet.pinboards.map((p) => p.port).join(" :")}`)

  // Past the registry's cold start before the faults begin.
  await sleep(LEASE_MS + 500)
  const records: Array<ClientRecord> = []
  const faults = new Map<FaultKind, number>(FAULT_KINDS.map((kind) => [kind, 0]))
  const injector = makeInjector(fleet, LEASE_MS, rng, (line) => log(`  ${line}`))
  const endAt = Date.now() + MINUTES * 60_000
  let faultsOver = false
  const clients = runClients(fleet, new Rng(SEED + 1), () => faultsOver, records)

  let lastReport = Date.now()
  while (Date.now() < endAt) {
    const kind = injector.inject()
    if (kind !== undefined) faults.set(kind, faults.get(kind)! + 1)
    await sleep(rng.range(INTERVAL_MS / 2, (INTERVAL_MS * 3) / 2))
    if (Date.now() - lastReport > 30_000) {
      lastReport = Date.now()
      const total = [...faults.values()].reduce((a, b) => a + b, 0)
      log(`  ${Math.round((endAt - Date.now()) / 1000)} s left: ${total} faults, ${records.length} requests`)
    }
  }
  log("faults stop; healing")
  await injector.healed()
  faultsOver = true
  await clients
  const recovery = await recover(fleet, records)

  const result = audit({ events: readEvents(fleet), clients: records, finalValues: await finalValues(fleet), known: knownAnswers })
  const totalFaults = [...faults.values()].reduce((a, b) => a + b, 0)
  log("")
  log(`faults injected: ${totalFaults}`)
  for (const [kind, n] of faults) log(`  ${kind.padEnd(32)} ${n}`)
  log(`requests: ${result.requests}`)
  log(`acknowledged writes: ${result.acknowledged} (accepted by the store: ${result.acceptedWrites}; activations: ${result.activations})`)
  log(`double activations: ${result.doubleActivations}`)
  log(`lost acknowledged writes: ${result.lostAcknowledged}`)
  log(`reads: ${result.reads}; stale reads (below a value acknowledged before the read): ${result.staleReads}`)
  log(`replayed bodies: ${result.replayedBodies}`)
  log(`unknown errors: ${result.unknownErrors}`)
  log(`worst recovery time: ${recovery.worstMs} ms (two leases: ${2 * LEASE_MS} ms)${recovery.unrecovered.length > 0 ? `; NOT recovered: ${recovery.unrecovered.join(" ")}` : ""}`)
  log("answers other than 200:")
  for (const [answer, n] of [...result.answers].sort((a, b) => b[1] - a[1])) log(`  ${String(n).padStart(7)}  ${answer}`)
  log("requests without an answer (a Pinboard down, a connection reset):")
  for (const [error, n] of [...result.unanswered].sort((a, b) => b[1] - a[1])) log(`  ${String(n).padStart(7)}  ${error}`)
  for (const problem of result.problems.slice(0, 50)) log(`PROBLEM ${problem}`)

  const ok =
    result.doubleActivations === 0 &&
    result.lostAcknowledged === 0 &&
    result.staleReads === 0 &&
    result.replayedBodies === 0 &&
    result.unknownErrors === 0 &&
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
