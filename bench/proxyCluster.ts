// The cluster row of bench/proxy.ts: the 64-byte GET through 1 and through 3 Pinboard
// processes on one Redis Cluster of 3 masters (no replicas: redis-server --cluster-enabled on
// loopback, test/support/RedisCluster.ts), rounds interleaved like the main tables.
//
// Layout: the cluster's 3 redis-servers and the 3 Pinboards (PINBOARD_REDIS_CLUSTER) run on
// the servers' core beside the worker of the main tables; one load-generator process on the
// load core opens all the connections, to one Pinboard, or split in thirds over the three
// (wrk, bench/wrk.ts: one thread per Pinboard, each with a third of the connections, rounded
// down: 30 of 32, 126 of 128). With 1 Pinboard measured the other two run
// idle, and their CPU is counted too. On a 2-core machine the 3 Pinboards share one core
// with the worker and the masters, so "3 / 1" is the cost of running replicas of Pinboard
// against one cluster (more processes, connections and pools on that core), not a scale-out
// figure; a speedup needs a core per Pinboard.
//
// One worker, registered through the first Pinboard and heartbeated there, serves them all;
// the ids are placed through the first Pinboard (the cold start is one lease per bucket)
// and every Pinboard must report the same placement, worker and epoch, for each id before
// anything is measured.
import { bucketOf } from "../src/contract/Bucket.js"
import { startRedisCluster, type RedisCluster } from "../test/support/RedisCluster.js"
import { measureHttp } from "./measure.js"
import { pinPid, type Proc } from "./processes.js"
import { broken, brokenCell, cpuText, fmt, ms, NOISY, share, table, type Cell, type Scenario } from "./proxyReport.js"
import {
  IDS,
  NAMESPACE,
  placedPaths,
  register,
  SERVER_CORE,
  startPinboard,
  TOKEN,
  waitForPlacements,
  waitHealthy,
  type PinboardProc,
  type Registration,
  type Servers
} from "./proxyTargets.js"

const MASTERS = 3
const PINBOARDS = 3
const BUCKETS = 16
const PREFIX = "bench"

export type ClusterTarget = "single" | "one" | "three"
const LABELS: Record<ClusterTarget, string> = {
  single: "1 Pinboard, one redis-server",
  one: "1 Pinboard, cluster",
  three: "3 Pinboards, cluster"
}

export interface ClusterRig {
  readonly cluster: RedisCluster
  readonly pinboards: ReadonlyArray<PinboardProc>
  readonly masterPids: ReadonlyArray<number>
}

export type ClusterCell = Omit<Cell, "target"> & { readonly target: ClusterTarget }

/** Starts the cluster, handed to `keep` at once so that every way out stops it, and the Pinboards on it. */
export const startClusterRig = async (keep: (cluster: RedisCluster) => void): Promise<ClusterRig> => {
  const cluster = await startRedisCluster({ masters: MASTERS, replicasPerMaster: 0 })
  keep(cluster)
  const masterPids = cluster.nodes.map((node) => {
    const pid = node.pid()
    if (pid === undefined) throw new Error(`cluster node :${node.port} has no pid`)
    pinPid(pid, SERVER_CORE)
    return pid
  })
  const env = { PINBOARD_REDIS_CLUSTER: cluster.seeds, PINBOARD_BUCKETS: String(BUCKETS), PINBOARD_REDIS_PREFIX: PREFIX }
  const pinboards: Array<PinboardProc> = []
  for (let i = 1; i <= PINBOARDS; i++) pinboards.push(await startPinboard(`pinboard ${i} (cluster)`, env))
  for (const pinboard of pinboards) await waitHealthy(pinboard)
  return { cluster, pinboards, masterPids }
}

/** Registers the worker through the first Pinboard, places the ids, and checks every Pinboard agrees. */
export const placeOnCluster = async (rig: ClusterRig, workerOrigin: string): Promise<Registration> => {
  const registration = await register(rig.pinboards[0]!.origin, workerOrigin)
  try {
    await checkPlacements(rig)
  } catch (error) {
    registration.stop()
    throw error
  }
  return registration
}

const checkPlacements = async (rig: ClusterRig): Promise<void> => {
  const [first, ...others] = rig.pinboards
  console.log(`cluster: ${await waitForPlacements(first!.origin)}`)
  for (const pinboard of others) await waitForPlacements(pinboard.origin)
  const perMaster = new Map<number, Array<string>>()
  for (const id of IDS) {
    const views = await Promise.all(rig.pinboards.map((pinboard) => placementOf(pinboard.origin, id)))
    const seen = new Set(views.map((view) => `${view.worker} ${view.epoch} ${view.live}`))
    if (seen.size !== 1 || !views[0]!.live) throw new Error(`${id}: the Pinboards disagree or the row is not live: ${[...seen].join(" | ")}`)
    const bucket = bucketOf(views[0]!.env, views[0]!.namespace, id, BUCKETS)
    const slot = Number((await rig.cluster.cli(rig.cluster.nodes[0]!.port, "CLUSTER", "KEYSLOT", `{${PREFIX}:${bucket}}`)).trim())
    const master = await rig.cluster.masterOf(slot)
    perMaster.set(master, [...(perMaster.get(master) ?? []), id])
  }
  const masters = (await rig.cluster.masters()).map((port) => `:${port} ${(perMaster.get(port) ?? []).length}`).join(", ")
  console.log(`cluster: all ${PINBOARDS} Pinboards report the same live placement (worker, epoch) for every id; ids per master: ${masters}`)
}

interface PlacementView {
  readonly namespace: string
  readonly env: string
  readonly worker: string
  readonly epoch: string
  readonly live: boolean
}

const placementOf = async (origin: string, id: string): Promise<PlacementView> => {
  const r = await fetch(`${origin}/registry/placements/${NAMESPACE.slice(1)}/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } })
  const body = (await r.json()) as PlacementView
  if (r.status !== 200) throw new Error(`${origin}: placement of ${id}: ${r.status} ${JSON.stringify(body)}`)
  return body
}

// ---------------------------------------------------------------------------------------
// Measuring: the same warm-up, windows and reversed order every other round as the main tables

export interface ClusterRun {
  readonly scenarios: ReadonlyArray<Scenario>
  readonly rounds: number
  readonly warmupS: number
  readonly windowS: number
  /** Measure the single-redis-server Pinboard here too (when the main tables did not). */
  readonly withSingle: boolean
}

export const runCluster = async (rig: ClusterRig, servers: Servers, run: ClusterRun): Promise<Array<ClusterCell>> => {
  const targets: ReadonlyArray<ClusterTarget> = run.withSingle ? ["single", "one", "three"] : ["one", "three"]
  const clusterPids = rig.pinboards.map((pinboard) => pinboard.proc.pid)
  const alive: ReadonlyArray<Proc> = [servers.worker, servers.pinboard, ...rig.pinboards.map((pinboard) => pinboard.proc)]
  const measure = async (scenario: Scenario, target: ClusterTarget, warmupS: number, seconds: number) => {
    const measured = await measureHttp(
      `${LABELS[target]}, ${scenario.title}`,
      {
        origins: target === "single" ? [servers.origins.pinboard] : target === "one" ? [rig.pinboards[0]!.origin] : rig.pinboards.map((p) => p.origin),
        paths: placedPaths(scenario.path),
        method: scenario.method,
        bodyBytes: scenario.bodyBytes,
        connections: scenario.connections,
        warmupS,
        seconds
      },
      target === "single"
        ? { proxy: [servers.pinboard.pid], worker: servers.worker.pid, redis: [servers.redis.pid] }
        : { proxy: clusterPids, worker: servers.worker.pid, redis: rig.masterPids },
      alive
    )
    const down = rig.cluster.nodes.filter((node) => !node.running())
    if (down.length > 0) throw new Error(`cluster node ${down.map((node) => `:${node.port}`).join(", ")} exited`)
    return measured
  }
  // Untimed first pass, so that the Pinboards that have not served yet have their code warm.
  for (const target of targets) await measure(run.scenarios[run.scenarios.length - 1]!, target, 2, 2)
  const cells: Array<ClusterCell> = []
  for (let round = 1; round <= run.rounds; round++) {
    for (const scenario of run.scenarios) {
      for (const target of round % 2 === 1 ? targets : [...targets].reverse()) {
        const { result, cpu } = await measure(scenario, target, run.warmupS, run.windowS)
        cells.push({ scenario, target, round, result, cpu })
        console.log(
          `cluster round ${round}  ${scenario.key.padEnd(8)}  ${LABELS[target].padEnd(28)}  ${fmt(result.perSecond).padStart(7)}/s` +
            `  p50 ${ms(result.p50)}  p99 ${ms(result.p99)}  max ${ms(result.max)} ms  errors ${broken(result)}  ${cpuText(cpu)}`
        )
      }
    }
  }
  return cells
}

// ---------------------------------------------------------------------------------------
// Report: one table per scenario, then the ratios; true when nothing broke

export const clusterReport = (cells: ReadonlyArray<ClusterCell>, scenarios: ReadonlyArray<Scenario>, rounds: number, singleFromMain: boolean): boolean => {
  const of = (scenario: Scenario, target: ClusterTarget) => cells.filter((c) => c.scenario.key === scenario.key && c.target === target)
  const best = (scenario: Scenario, target: ClusterTarget) => of(scenario, target).reduce((a, b) => (b.result.perSecond > a.result.perSecond ? b : a))
  const targets = (["single", "one", "three"] as const).filter((target) => cells.some((c) => c.target === target))
  console.log("")
  console.log(`Cluster row: 64-byte GET on one Redis Cluster of ${MASTERS} masters, no replicas (best of ${rounds} round${rounds === 1 ? "" : "s"} by rate,`)
  console.log(`with that round's latencies); core 1 = share of core 1 used by the Pinboards (all ${PINBOARDS} on the cluster, counted also`)
  console.log(`when 1 is measured), the worker, the redis-servers (the ${MASTERS} masters).${singleFromMain ? ` "${LABELS.single}" is from the tables above.` : ""}`)
  console.log(`On this machine the ${PINBOARDS} Pinboards share core 1: "3 / 1" is the cost of replicas on one cluster, not a scale-out speedup.`)
  for (const scenario of scenarios) {
    console.log("")
    console.log(`${scenario.title} (requests/s)`)
    console.log(table(
      ["target", "req/s", "p50 ms", "p99 ms", "max ms", "errors/non-2xx", "rounds (other)", "core 1: Pinboards", "worker", "redis", "other"],
      targets.map((target) => {
        const b = best(scenario, target)
        const all = of(scenario, target)
        return [
          LABELS[target],
          fmt(b.result.perSecond),
          ms(b.result.p50),
          ms(b.result.p99),
          ms(b.result.max),
          `${all.reduce((n, c) => n + c.result.errors + c.result.timeouts, 0)}/${all.reduce((n, c) => n + c.result.non2xx, 0)}`,
          all.map((c) => `${fmt(c.result.perSecond)} (${c.cpu.others.toFixed(2)}${c.cpu.others > NOISY ? "!" : ""})`).join(" "),
          share(b.cpu.proxy),
          share(b.cpu.worker),
          share(b.cpu.redis),
          share(b.cpu.others)
        ]
      })
    ))
  }
  const rate = (scenario: Scenario, target: ClusterTarget) => best(scenario, target).result.perSecond
  const p99 = (scenario: Scenario, target: ClusterTarget) => best(scenario, target).result.p99
  const rows: Array<[string, (s: Scenario) => number]> = [
    ["req/s, 3 Pinboards / 1 Pinboard on the cluster", (s) => rate(s, "three") / rate(s, "one")],
    ["p99, 3 Pinboards / 1 Pinboard on the cluster", (s) => p99(s, "three") / p99(s, "one")]
  ]
  if (targets.includes("single")) {
    rows.push(["req/s, 1 Pinboard: cluster / one redis-server", (s) => rate(s, "one") / rate(s, "single")])
    rows.push(["req/s, 3 Pinboards on the cluster / 1 on one redis-server", (s) => rate(s, "three") / rate(s, "single")])
  }
  console.log("")
  console.log("Cluster ratios (best of rounds)")
  console.log(table(["", ...scenarios.map((s) => s.key)], rows.map(([name, of]) => [name, ...scenarios.map((s) => of(s).toFixed(2))])))
  // The main tables' rows are reported there.
  const measuredHere = cells.filter((c) => !(singleFromMain && c.target === "single"))
  const faulty = measuredHere.filter(brokenCell)
  for (const c of faulty) {
    console.log(
      `BROKEN cluster round ${c.round}, ${c.scenario.title}, ${LABELS[c.target]}: ${c.result.errors} errors, ` +
        `${c.result.timeouts} timeouts, ${c.result.non2xx} non-2xx ${JSON.stringify(c.result.statuses)}`
    )
  }
  return faulty.length === 0
}
