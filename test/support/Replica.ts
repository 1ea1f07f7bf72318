// A replica of the built Pinboard at ports the test chose, so that it can be stopped and started
// again where its balancer expects it (a rolling restart). Its registry API has its own listener
// (PINBOARD_REGISTRY_PORT). Fleet.ts's Pinboard picks its own port on every start.
import { existsSync } from "node:fs"
import { BUCKETS, PROCESS_START_MS, TOKEN, type Pinboard } from "./Fleet.js"
import { freePort, spawnProcess } from "./Processes.js"
import { poll, scaled } from "./Time.js"

const MAIN = new URL("../../dist/main.js", import.meta.url).pathname

export interface ReplicaSpec {
  readonly port: number
  readonly registryPort: number
  readonly redisUrl: string
  readonly prefix: string
  readonly leaseMs: number
  /** More PINBOARD_* variables, laid over the rest. */
  readonly env: Readonly<Record<string, string>>
}

export interface Replica extends Pinboard {
  readonly spec: ReplicaSpec
  readonly registryUrl: string
}

/** A spec on fresh free ports. */
export const replicaSpec = async (settings: Omit<ReplicaSpec, "port" | "registryPort">): Promise<ReplicaSpec> => ({
  ...settings,
  port: await freePort(),
  registryPort: await freePort()
})

/** GET /readyz on the data port: its status, or 0 when nothing answers. */
export const readiness = (replica: Replica): Promise<number> =>
  fetch(`${replica.url}/readyz`, { signal: AbortSignal.timeout(scaled(1000)) }).then(
    async (res) => (await res.arrayBuffer(), res.status),
    () => 0
  )

/** Starts the replica and resolves once its /readyz answers 200. */
export const startReplica = async (spec: ReplicaSpec): Promise<Replica> => {
  if (!existsSync(MAIN)) throw new Error("dist/main.js is missing: run `npm run build` before the end-to-end tests")
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("PINBOARD_")))
  const env = {
    ...clean,
    PINBOARD_TOKEN: TOKEN,
    PINBOARD_HOST: "127.0.0.1",
    PINBOARD_PORT: String(spec.port),
    PINBOARD_REGISTRY_PORT: String(spec.registryPort),
    PINBOARD_REDIS_URL: spec.redisUrl,
    PINBOARD_REDIS_PREFIX: spec.prefix,
    PINBOARD_LEASE_MS: String(spec.leaseMs),
    PINBOARD_BUCKETS: String(BUCKETS),
    ...spec.env
  }
  const child = spawnProcess(process.execPath, [MAIN], { env }, { name: `pinboard :${spec.port}` })
  const replica: Replica = {
    spec,
    url: `http://127.0.0.1:${spec.port}`,
    port: spec.port,
    registryUrl: `http://127.0.0.1:${spec.registryPort}`,
    pid: child.pid,
    process: child,
    leaseMs: spec.leaseMs,
    stop: async () => void (await child.kill())
  }
  await poll(
    async () => {
      if (child.exit !== undefined) throw new Error(`pinboard exited during start-up (${JSON.stringify(child.exit)})`)
      return (await readiness(replica)) === 200
    },
    { timeoutMs: PROCESS_START_MS, reason: `pinboard's /readyz on ${replica.url}` }
  ).catch(async (error: Error) => {
    await child.kill()
    throw new Error(`${error.message}; its output:\n${child.lines.join("\n")}`)
  })
  return replica
}
