// A real local Redis Cluster for tests and benchmarks: redis-server nodes with
// --cluster-enabled on free loopback ports (data and bus ports both chosen free, never
// 6379), joined by `redis-cli --cluster create`, each stopped by its pid.
import { execFile, spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { freePort } from "./Ports.js"
import { ADMIN, type Certificates } from "./SecureRedis.js"
import { scaled } from "./Time.js"

const run = promisify(execFile)
/** The cadence of the polls below (not a bound). */
const pollPause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export interface ClusterNode {
  readonly port: number
  readonly pid: () => number | undefined
  readonly running: () => boolean
}

export interface RedisCluster {
  readonly nodes: ReadonlyArray<ClusterNode>
  /** `host:port,host:port,...` as PINBOARD_REDIS_CLUSTER takes it. */
  readonly seeds: string
  /** The port of the master serving `slot`, as the cluster reports it now. */
  readonly masterOf: (slot: number) => Promise<number>
  /** The ports of the masters that serve slots now. */
  readonly masters: () => Promise<ReadonlyArray<number>>
  /** SIGKILL one node by pid. */
  readonly kill: (port: number) => Promise<void>
  /** Starts a killed node again on its port and directory (no persistence: it comes back empty). */
  readonly restart: (port: number) => Promise<void>
  /** Resolves once every running node reports cluster_state:ok and agrees on the masters; fails after `timeoutMs` (nominal, scaled). */
  readonly waitHealthy: (timeoutMs?: number) => Promise<void>
  /**
   * The online replica of `master` once it has applied everything the master has written so
   * far: a failover now would promote it with the master's data (writes after this may not
   * have reached it: replication is asynchronous).
   */
  readonly syncedReplicaOf: (master: number, timeoutMs?: number) => Promise<number>
  /** Runs one redis-cli command against a node. */
  readonly cli: (port: number, ...args: ReadonlyArray<string>) => Promise<string>
  readonly stop: () => Promise<void>
  readonly stopSync: () => void
}

export interface ClusterOptions {
  readonly masters?: number
  readonly replicasPerMaster?: number
  /** cluster-node-timeout: how long a silent master takes to be failed over. */
  readonly nodeTimeoutMs?: number
  /** TLS only (clients, the cluster bus and replication), default user off, these ACL users and the admin. */
  readonly secure?: { readonly certificates: Certificates; readonly users: ReadonlyArray<string> }
}

interface NodeState {
  readonly port: number
  readonly busPort: number
  readonly dir: string
  child: ChildProcess | undefined
}

const isRunning = (child: ChildProcess | undefined): boolean =>
  child !== undefined && child.exitCode === null && child.signalCode === null

export const startRedisCluster = async (options: ClusterOptions = {}): Promise<RedisCluster> => {
  const masters = options.masters ?? 3
  const replicas = options.replicasPerMaster ?? 1
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 1000
  const count = masters * (1 + replicas)
  const states: Array<NodeState> = []
  for (let i = 0; i < count; i++) {
    states.push({
      port: await freePort(),
      busPort: await freePort(),
      dir: mkdtempSync(join(tmpdir(), "pinboard-cluster-")),
      child: undefined
    })
  }

  const secure = options.secure
  /** redis-cli's options to reach a node at all: TLS and the admin on a secure cluster. */
  const access = secure === undefined
    ? []
    : ["--tls", "--cacert", secure.certificates.ca, "--user", ADMIN.user, "--pass", ADMIN.password, "--no-auth-warning"]
  const cli = async (port: number, ...args: ReadonlyArray<string>): Promise<string> =>
    (await run("redis-cli", [...access, "-h", "127.0.0.1", "-p", String(port), ...args], { timeout: scaled(10_000) })).stdout

  const secureArgs = (state: NodeState): Array<string> => {
    if (secure === undefined) return ["--port", String(state.port)]
    const acl = join(state.dir, "users.acl")
    writeFileSync(acl, ["default off", `${ADMIN.user} on >${ADMIN.password} ~* &* +@all`, ...secure.users].map((rule) => `user ${rule}\n`).join(""))
    const c = secure.certificates
    return [
      "--port", "0",
      "--tls-port", String(state.port),
      "--tls-cluster", "yes",
      "--tls-replication", "yes",
      "--tls-cert-file", c.serverCert,
      "--tls-key-file", c.serverKey,
      "--tls-ca-cert-file", c.ca,
      "--tls-auth-clients", "no",
      "--aclfile", acl,
      "--masteruser", ADMIN.user,
      "--masterauth", ADMIN.password
    ]
  }

  const launch = (state: NodeState) => {
    const child = spawn(
      "redis-server",
      [
        ...secureArgs(state),
        "--bind", "127.0.0.1",
        "--cluster-enabled", "yes",
        "--cluster-port", String(state.busPort),
        "--cluster-config-file", join(state.dir, "nodes.conf"),
        "--cluster-node-timeout", String(nodeTimeoutMs),
        // A dead shard must not stop the others (docs/deploy.md).
        "--cluster-require-full-coverage", "no",
        "--save", "",
        "--appendonly", "no",
        "--dir", state.dir,
        "--loglevel", "warning"
      ],
      { stdio: "ignore" }
    )
    child.on("error", () => {
      // a spawn failure shows as a node that never answers
    })
    state.child = child
  }

  /** Waits until this node's redis-server answers on its port; false if it exited or another answers there. */
  const answers = async (state: NodeState): Promise<boolean> => {
    const started = performance.now()
    for (;;) {
      if (!isRunning(state.child)) return false
      const pid = infoField(await cli(state.port, "INFO", "server").catch(() => ""), "process_id")
      if (pid !== undefined) return Number(pid) === state.child?.pid
      if (performance.now() - started > scaled(10_000)) throw new Error(`redis-server on ${state.port} did not start`)
      await pollPause(20)
    }
  }

  const waitAnswering = async (state: NodeState) => {
    if (!(await answers(state))) throw new Error(`redis-server on ${state.port} exited`)
  }

  /** A node whose port another process took between the check and the bind starts again on fresh ports. */
  const startNode = async (index: number) => {
    for (let attempt = 1; ; attempt++) {
      launch(states[index]!)
      if (await answers(states[index]!)) return
      killState(states[index]!)
      if (attempt === 5) throw new Error(`redis-server on ${states[index]!.port} exited`)
      rmSync(join(states[index]!.dir, "nodes.conf"), { force: true })
      states[index] = { ...states[index]!, port: await freePort(), busPort: await freePort(), child: undefined }
    }
  }

  const killState = (state: NodeState) => {
    const pid = state.child?.pid
    if (pid !== undefined && isRunning(state.child)) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
  }

  const stopSync = () => {
    for (const state of states) {
      killState(state)
      rmSync(state.dir, { recursive: true, force: true })
    }
  }

  const stateOf = (port: number): NodeState => {
    const state = states.find((s) => s.port === port)
    if (state === undefined) throw new Error(`no cluster node on ${port}`)
    return state
  }

  /** Masters with slots, read from CLUSTER SHARDS of a running node. */
  const slotMap = async (): Promise<ReadonlyArray<{ readonly from: number; readonly to: number; readonly port: number }>> => {
    for (const state of states) {
      if (!isRunning(state.child)) continue
      const out = await cli(state.port, "CLUSTER", "NODES").catch(() => "")
      if (out === "") continue
      const ranges: Array<{ from: number; to: number; port: number }> = []
      for (const line of out.trim().split("\n")) {
        const fields = line.split(" ")
        const flags = fields[2] ?? ""
        if (!flags.includes("master") || flags.includes("fail")) continue
        const port = Number(fields[1]!.split(":")[1]!.split("@")[0])
        for (const range of fields.slice(8)) {
          if (range.startsWith("[")) continue
          const [from, to] = range.split("-")
          ranges.push({ from: Number(from), to: Number(to ?? from), port })
        }
      }
      return ranges
    }
    throw new Error("no cluster node answers")
  }

  const masterOf = async (slot: number): Promise<number> => {
    const range = (await slotMap()).find((r) => r.from <= slot && slot <= r.to)
    if (range === undefined) throw new Error(`slot ${slot} has no master`)
    return range.port
  }

  const waitHealthy = async (timeoutMs = 20_000) => {
    const started = performance.now()
    for (;;) {
      const running = states.filter((s) => isRunning(s.child))
      const infos = await Promise.all(running.map((s) => cli(s.port, "CLUSTER", "INFO").catch(() => "")))
      if (infos.every((info) => info.includes("cluster_state:ok"))) {
        const ranges = await slotMap().catch(() => [])
        const covered = ranges.reduce((sum, r) => sum + (r.to - r.from + 1), 0)
        if (covered === 16384 && ranges.every((r) => isRunning(stateOf(r.port).child))) return
      }
      if (performance.now() - started > scaled(timeoutMs)) throw new Error("the Redis Cluster did not become healthy")
      await pollPause(100)
    }
  }

  try {
    await Promise.all(states.map((_, index) => startNode(index)))
    await run(
      "redis-cli",
      [
        ...access,
        "--cluster", "create",
        ...states.map((s) => `127.0.0.1:${s.port}`),
        "--cluster-replicas", String(replicas),
        "--cluster-yes"
      ],
      { timeout: scaled(30_000) }
    )
    await waitHealthy()
    if (replicas > 0) await waitReplicasInSync(states, cli)
  } catch (error) {
    stopSync()
    throw error
  }

  return {
    nodes: states.map((state) => ({
      port: state.port,
      pid: () => state.child?.pid,
      running: () => isRunning(state.child)
    })),
    seeds: states.map((s) => `127.0.0.1:${s.port}`).join(","),
    masterOf,
    masters: async () => [...new Set((await slotMap()).map((r) => r.port))].sort((a, b) => a - b),
    kill: async (port) => {
      const state = stateOf(port)
      const child = state.child
      if (!isRunning(child)) return
      const gone = new Promise((resolve) => child!.once("exit", resolve))
      killState(state)
      await gone
    },
    restart: async (port) => {
      const state = stateOf(port)
      if (isRunning(state.child)) throw new Error(`node ${port} is running`)
      launch(state)
      await waitAnswering(state)
    },
    waitHealthy,
    syncedReplicaOf: async (master, timeoutMs = 10_000) => {
      const started = performance.now()
      const limitMs = scaled(timeoutMs)
      for (;;) {
        const info = await cli(master, "INFO", "replication").catch(() => "")
        const online = /^slave\d+:ip=[^,]*,port=(\d+),state=online/m.exec(info)
        if (online !== null) {
          const port = Number(online[1])
          const applied = infoField(await cli(port, "INFO", "replication").catch(() => ""), "slave_repl_offset")
          if (applied !== undefined && Number(applied) >= Number(infoField(info, "master_repl_offset"))) return port
        }
        if (performance.now() - started > limitMs) throw new Error(`master ${master} has no synced replica`)
        await pollPause(50)
      }
    },
    cli,
    stop: async () => {
      await Promise.all(
        states.map(async (state) => {
          const child = state.child
          if (isRunning(child)) {
            const gone = new Promise((resolve) => child!.once("exit", resolve))
            killState(state)
            await gone
          }
          rmSync(state.dir, { recursive: true, force: true })
        })
      )
    },
    stopSync
  }
}

/** A field of an INFO answer. */
export const infoField = (info: string, field: string): string | undefined => new RegExp(`^${field}:(.*)$`, "m").exec(info)?.[1]?.trim()

/** Every replica has finished its first sync, so a failover promotes a replica with the data. */
const waitReplicasInSync = async (
  states: ReadonlyArray<NodeState>,
  cli: (port: number, ...args: ReadonlyArray<string>) => Promise<string>
) => {
  const started = performance.now()
  for (;;) {
    const infos = await Promise.all(states.map((s) => cli(s.port, "INFO", "replication").catch(() => "")))
    const replicas = infos.filter((info) => info.includes("role:slave"))
    if (replicas.length > 0 && replicas.every((info) => info.includes("master_link_status:up"))) return
    if (performance.now() - started > scaled(20_000)) throw new Error("the cluster's replicas did not sync")
    await pollPause(100)
  }
}
