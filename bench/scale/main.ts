// How the registry's Redis cost grows with the fleet (docs/deploy.md "Sizing"), measured only
// through the registry service (register, heartbeat, resolve, sweep) and Redis-wide facts
// (INFO commandstats, cpu and memory, DBSIZE, SLOWLOG), never key or script names, so that it
// measures a rewritten registry alike. Prints figures, ratios and the fleet-scale issue's
// targets beside them; it is not a test (nothing is asserted: the machine is noisy).
//
//   placement  at each fleet size (10, 1,000 and 10,000 workers of one namespace, 16 buckets),
//              Redis µs per first-use placement, per sweep run and per heartbeat sent one after
//              another, Pinboard's CPU per placement, with ratios to the first size (fleet.ts)
//   heartbeat  at each fleet size, every worker heartbeats once, spread evenly over one
//              heartbeat interval of a 15 s lease, concurrently: Redis µs and script calls per
//              heartbeat, the caller's latency (fleet.ts)
//   lapse      a worker holding 100,000 and 400,000 rows lapses while the sweep runs and other
//              ids are resolved: longest Redis call, longest and p99 resolve, failures, time
//              until the rows are gone (lapse.ts)
//   memory     used_memory per placement over 100,000 new ids (memory.ts)
//
//   npm run bench:scale                                  every scenario on one redis-server (about 5 min)
//   npm run bench:scale -- --only=heartbeat,lapse        some scenarios only
//   npm run bench:scale -- --workers=10,1000             other fleet sizes (placement, heartbeat)
//   npm run bench:scale -- --placements=200              first-use placements per size
//   npm run bench:scale -- --heartbeat-window-ms=1000    a shorter heartbeat interval, for quick runs
//   npm run bench:scale -- --lapse-rows=100000           A's rows (default 100000,400000)
//   npm run bench:scale -- --lapse-lease-ms=8000         the lease in the lapse scenario
//   npm run bench:scale -- --memory-rows=100000          new ids of the memory scenario
//   npm run bench:scale -- --deep                        memory also over 1,000,000 ids (minutes; not for CI)
//   npm run bench:scale -- --cluster                     placement and heartbeat also on a local 3-master Cluster
//
// Starts its own redis-server on a free loopback port (no persistence), and with --cluster a
// local Redis Cluster of 3 masters without replicas; stops them by pid. Each scenario starts
// from an empty Redis (FLUSHALL).
import { availableParallelism, loadavg } from "node:os"
import { flagArg, numberArg, textArg } from "../args.js"
import { runFleet } from "./fleet.js"
import { runLapse } from "./lapse.js"
import { runMemory } from "./memory.js"
import { startClusterTarget, startServerTarget, flushAll, type ScaleTarget } from "./redis.js"
import { fixed, seconds } from "./report.js"

/** Whatever happens, the process ends (and the servers with it) after this. */
const HARD_LIMIT_MS = 45 * 60_000
const SCENARIOS = ["placement", "heartbeat", "lapse", "memory"] as const
type Scenario = (typeof SCENARIOS)[number]

const list = (name: string, fallback: string): ReadonlyArray<number> => {
  const values = (textArg(name) ?? fallback).split(",").map(Number)
  if (values.some((n) => !(Number.isInteger(n) && n > 0))) throw new Error(`--${name}= expects positive integers`)
  return values
}

const only = textArg("only")?.split(",") ?? [...SCENARIOS]
const unknown = only.filter((s) => !(SCENARIOS as ReadonlyArray<string>).includes(s))
if (unknown.length > 0) throw new Error(`--only= takes ${SCENARIOS.join(", ")}; not ${unknown.join(", ")}`)
const runs = (scenario: Scenario) => only.includes(scenario)

const fleetOptions = {
  sizes: list("workers", "10,1000,10000"),
  placements: Math.round(numberArg("placements", 200)),
  heartbeatWindowMs: Math.round(numberArg("heartbeat-window-ms", 5000)),
  placement: runs("placement"),
  heartbeat: runs("heartbeat")
}
const lapseRows = list("lapse-rows", "100000,400000")
const lapseLeaseMs = Math.round(numberArg("lapse-lease-ms", 8000))
const memoryRows = [...list("memory-rows", "100000"), ...(flagArg("deep") ? [1_000_000] : [])]
const cluster = flagArg("cluster")

const targets: Array<ScaleTarget> = []

/** The machine's load average over the last minute, for judging the noise. */
const load = () => `load average ${fixed(loadavg()[0]!, 1)} on ${availableParallelism()} cores`

const timed = async (name: string, run: () => Promise<void>): Promise<void> => {
  const started = performance.now()
  console.log(`\n== ${name} (${load()})`)
  await run()
  console.log(`== ${name} took ${seconds(performance.now() - started)} (${load()})`)
}

const onTarget = async (start: () => Promise<ScaleTarget>, run: (target: ScaleTarget) => Promise<void>): Promise<void> => {
  const target = await start()
  targets.push(target)
  try {
    console.log(target.label)
    await run(target)
  } finally {
    await target.stop()
  }
}

const main = async (): Promise<void> => {
  const started = performance.now()
  const fleet = fleetOptions.placement || fleetOptions.heartbeat
  const which = [fleetOptions.placement ? "placement" : "", fleetOptions.heartbeat ? "heartbeat" : ""].filter((s) => s !== "").join(" and ")
  await onTarget(startServerTarget, async (target) => {
    if (fleet) await timed(`${which} at ${fleetOptions.sizes.map((n) => fixed(n)).join(", ")} workers`, async () => {
      await flushAll(target)
      await runFleet(target, "scale", fleetOptions)
    })
    if (runs("lapse")) await timed(`lapse of a worker holding ${lapseRows.map((n) => fixed(n)).join(", ")} rows`, () => runLapse(target, lapseRows, lapseLeaseMs))
    if (runs("memory")) await timed(`memory over ${memoryRows.map((n) => fixed(n)).join(", ")} new ids`, () => runMemory(target, memoryRows))
  })
  if (cluster) {
    if (!fleet) console.log("\n--cluster runs placement and heartbeat only; neither was chosen")
    else
      await onTarget(
        () => startClusterTarget(3),
        (target) => timed(`${which} on a 3-master Redis Cluster`, () => runFleet(target, "cluster", fleetOptions))
      )
  }
  console.log(`\nbench:scale took ${seconds(performance.now() - started)}`)
}

setTimeout(() => {
  console.error(`bench:scale: still running after ${HARD_LIMIT_MS / 60_000} min; stopping`)
  for (const target of targets) target.stopSync()
  process.exit(1)
}, HARD_LIMIT_MS).unref()

// Ends the process once done: an ioredis Cluster client was seen keeping it alive after disconnect.
main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    for (const target of targets) target.stopSync()
    process.exit(1)
  }
)
