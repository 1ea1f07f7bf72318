// A fleet of worker processes built on the worker library (test/fixtures/library-worker.mjs)
// behind the built Pinboard on a real redis-server. Fleet.ts starts Redis and Pinboard; this
// adds the library workers, each reaching Pinboard's registry through its own PinboardLink (a
// small HTTP proxy the test controls, so it can cut a worker's heartbeats while Pinboard still
// forwards to the worker directly), the workers' event logs, and attestations and affinity
// values a test needs to steer requests. `stop` ends everything it started (processes by pid).
import { existsSync, readFileSync } from "node:fs"
import http, { type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo, Socket } from "node:net"
import { join } from "node:path"
import { makeAttestationSigner, type AttestationClaims } from "../../src/auth/Attestation.js"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import { rendezvousScore } from "../../src/registry/Placement.js"
import { eventually, Fleet, PROCESS_START_MS, registryCall, TOKEN, uid, waitForColdStart, type Pinboard } from "./Fleet.js"
import { spawnProcess, type Spawned } from "./Processes.js"
import type { RedisCluster } from "./RedisCluster.js"
import type { RedisServer } from "./RedisServer.js"

const LIBRARY_WORKER = new URL("../fixtures/library-worker.mjs", import.meta.url).pathname
const LIBRARY_DIST = new URL("../../dist/worker/index.js", import.meta.url).pathname

/** What a worker's registry traffic meets: passed, cut before Pinboard, or answered by Pinboard but the answer lost. */
export type HeartbeatMode = "pass" | "drop" | "lose-answers"

/**
 * An HTTP proxy between one worker and Pinboard (the worker's `pinboard` option): registry
 * calls and instance calls go through it. Heartbeats can be cut (`drop`: the connection is
 * reset before Pinboard sees them) or their answers lost (`lose-answers`: Pinboard renews the
 * lease, the worker never learns). It keeps the last lease end Pinboard confirmed.
 */
export class PinboardLink {
  private mode: HeartbeatMode = "pass"
  private readonly sockets = new Set<Socket>()
  private readonly agent = new http.Agent({ keepAlive: true })
  /** `leaseExpiresAt` of the last register or heartbeat answer Pinboard gave (Pinboard's clock). */
  lastLeaseExpiresAt: number | undefined
  /** The incarnation of the last registration. */
  incarnation: string | undefined

  private constructor(
    private readonly server: http.Server,
    private readonly target: Pinboard,
    readonly url: string
  ) {}

  static async start(target: Pinboard): Promise<PinboardLink> {
    const server = http.createServer()
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const link = new PinboardLink(server, target, `http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    server.on("connection", (socket) => {
      link.sockets.add(socket)
      socket.once("close", () => link.sockets.delete(socket))
    })
    server.on("request", (req, res) => link.handle(req, res))
    return link
  }

  setHeartbeats(mode: HeartbeatMode): void {
    this.mode = mode
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? "/"
    const isHeartbeat = req.method === "POST" && /^\/registry\/workers\/[^/]+\/heartbeat$/.test(url)
    const isRegister = req.method === "POST" && url === "/registry/workers"
    if (isHeartbeat && this.mode === "drop") {
      req.socket.destroy()
      return
    }
    const loseAnswer = isHeartbeat && this.mode === "lose-answers"
    // The Host header passes unchanged: in hostname-aware mode it names the callee's hostname.
    const upstream = http.request({ host: "127.0.0.1", port: this.target.port, method: req.method, path: url, headers: req.headers, agent: this.agent })
    upstream.on("error", () => res.destroy())
    upstream.on("response", (answer) => {
      if (!(isHeartbeat || isRegister)) {
        res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
        answer.pipe(res)
        return
      }
      const chunks: Array<Buffer> = []
      answer.on("data", (chunk: Buffer) => chunks.push(chunk))
      answer.on("end", () => {
        const body = Buffer.concat(chunks)
        if (answer.statusCode === 200) {
          const parsed = JSON.parse(body.toString()) as { leaseExpiresAt?: number; incarnation?: string }
          if (parsed.leaseExpiresAt !== undefined) this.lastLeaseExpiresAt = parsed.leaseExpiresAt
          if (isRegister && parsed.incarnation !== undefined) this.incarnation = parsed.incarnation
        }
        if (loseAnswer) return void req.socket.destroy()
        res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
        res.end(body)
      })
    })
    req.pipe(upstream)
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy()
    this.agent.destroy()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

export interface LibraryWorkerOptions {
  readonly id?: string
  readonly namespaces: ReadonlyArray<string>
  readonly leaseMarginMs?: number
  readonly idleMs?: number
  /** How long the deactivate hook takes. */
  readonly deactivateMs?: number
  readonly headroom?: number
  /** Hostname-aware mode: the hostnames (each with its env) every namespace is registered for. */
  readonly hostnames?: ReadonlyArray<{ readonly hostname: string; readonly env: string }>
  readonly registrationEpoch?: string
  /** The library's `traces` option: spans sent to this OTLP/HTTP endpoint. */
  readonly otlpEndpoint?: string
}

/** Options for both workers of a pair; `a` adds some for worker A only. */
export type PairOptions = Omit<LibraryWorkerOptions, "namespaces" | "id"> & {
  readonly a?: Omit<LibraryWorkerOptions, "namespaces" | "id">
}

export interface LibraryWorker {
  readonly id: string
  readonly port: number
  readonly pid: number
  readonly process: Spawned
  readonly link: PinboardLink
}

/** One line of a library worker's event log (see test/fixtures/library-worker.mjs). */
export interface WorkerEvent {
  readonly t: number
  readonly event: "activate" | "deactivate" | "winddown" | "health" | "exit"
  readonly env?: string
  readonly ns?: string
  readonly id?: string
  readonly epoch?: string
  readonly reason?: string
  readonly deadline?: number
  readonly healthy?: boolean
  readonly count?: number
  /** The exit code, for `exit`. */
  readonly code?: number
}

export interface ListedWorker {
  readonly worker: string
  readonly leaseExpiresAt: number
  readonly nacks: number
  readonly draining: boolean
  readonly degraded: boolean
}

/** Header carrying the affinity value (the fleet's `affinity.key`), to steer new placements. */
export const AFFINITY_HEADER = "x-affinity"

export interface LibraryFleetOptions {
  /** Merged into the Pinboard config. */
  readonly config?: Record<string, unknown>
  /** Pinboard's registry on this Redis Cluster; the workers' FencedStore stays on the redis-server. */
  readonly cluster?: RedisCluster
  readonly leaseMs?: number
  /** More environment for Pinboard (PINBOARD_* variables). */
  readonly env?: Readonly<Record<string, string>>
}

export class LibraryFleet {
  readonly fleet = new Fleet()
  /** Pinboard's key prefix in Redis (for tests that drive the Redis backend themselves). */
  readonly prefix = uid("pb")
  private readonly stops: Array<() => Promise<unknown> | void> = []
  private started: { redis: RedisServer; pinboard: Pinboard } | undefined

  get redis(): RedisServer {
    return this.started!.redis
  }

  get pinboard(): Pinboard {
    return this.started!.pinboard
  }

  /** Redis, Pinboard (on Redis or the given cluster, affinity from `x-affinity`, nacks never degrading), and a warm registry. */
  async start(options: LibraryFleetOptions = {}): Promise<void> {
    if (!existsSync(LIBRARY_DIST)) throw new Error("dist/worker is missing: run `npm run build` before the end-to-end tests")
    const redis = await this.fleet.redis()
    const pinboard = await this.fleet.pinboard({
      ...(options.cluster === undefined ? { redis } : { cluster: options.cluster }),
      ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
      ...(options.env === undefined ? {} : { env: options.env }),
      prefix: this.prefix,
      config: {
        affinity: { key: `header:${AFFINITY_HEADER}` },
        nack: { threshold: 1_000_000, windowMs: 600_000 },
        ...options.config
      }
    })
    this.started = { redis, pinboard }
    // Registration is the buckets' first use: cold start ends one lease after it. In
    // hostname-aware mode the warm-up namespace is bound for a hostname of its own, in env ""
    // so that the bucket hash is the plain one.
    const warmHost = options.config?.hostnameAware === true ? "warm.test" : undefined
    const warm = await this.worker({ namespaces: ["/warm"], ...(warmHost === undefined ? {} : { hostnames: [{ hostname: warmHost, env: "" }] }) })
    await waitForColdStart(pinboard, "/warm", warmHost)
    await this.kill(warm)
  }

  /** Starts a library worker and waits until it prints its port and Pinboard lists it. */
  async worker(options: LibraryWorkerOptions): Promise<LibraryWorker> {
    const id = options.id ?? uid("lw")
    const link = await PinboardLink.start(this.pinboard)
    this.stops.push(() => link.stop())
    const args = [
      LIBRARY_WORKER,
      "--pinboard", link.url,
      "--token", TOKEN,
      "--worker", id,
      "--namespaces", options.namespaces.join(","),
      "--redis", this.redis.url,
      "--state-dir", this.fleet.stateDir,
      "--headroom", String(options.headroom ?? 10)
    ]
    if (options.leaseMarginMs !== undefined) args.push("--lease-margin-ms", String(options.leaseMarginMs))
    if (options.idleMs !== undefined) args.push("--idle-ms", String(options.idleMs))
    if (options.deactivateMs !== undefined) args.push("--deactivate-ms", String(options.deactivateMs))
    if (options.hostnames !== undefined) args.push("--hostnames", JSON.stringify(options.hostnames))
    if (options.registrationEpoch !== undefined) args.push("--registration-epoch", options.registrationEpoch)
    if (options.otlpEndpoint !== undefined) args.push("--otlp-endpoint", options.otlpEndpoint)
    const child = spawnProcess(process.execPath, args)
    this.stops.push(() => child.kill())
    const ready = await child.waitForLine(new RegExp(`^worker ${id} ready on (\\d+)$`), PROCESS_START_MS)
    await eventually(async () => {
      if ((await this.listed(id)) === undefined) throw new Error(`worker ${id} is not registered yet:\n${child.lines.join("\n")}`)
    }, 10_000)
    return { id, port: Number(ready[1]), pid: child.pid, process: child, link }
  }

  /** Two library workers on one fresh namespace. */
  async pair(options: PairOptions = {}): Promise<{ namespace: string; a: LibraryWorker; b: LibraryWorker }> {
    const namespace = `/${uid("ns")}`
    const { a: aOptions, ...common } = options
    const [a, b] = await Promise.all([
      this.worker({ ...common, ...aOptions, namespaces: [namespace] }),
      this.worker({ ...common, namespaces: [namespace] })
    ])
    return { namespace, a, b }
  }

  async kill(worker: LibraryWorker): Promise<void> {
    await worker.process.kill()
  }

  /** The worker's row in `GET /registry/workers`, if listed. */
  async listed(worker: string): Promise<ListedWorker | undefined> {
    const answer = await registryCall(this.pinboard, "GET", "/registry/workers")
    if (answer.status !== 200) throw new Error(`workers answered ${answer.status} ${answer.text}`)
    return (answer.json as { workers: Array<ListedWorker> }).workers.find((w) => w.worker === worker)
  }

  /** Every event the worker logged so far, optionally only those of one id. */
  events(worker: string, id?: string): Array<WorkerEvent> {
    const file = join(this.fleet.stateDir, `${worker}.log`)
    if (!existsSync(file)) return []
    const all = readFileSync(file, "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as WorkerEvent)
    return id === undefined ? all : all.filter((e) => e.id === id)
  }

  /** Polls the worker's log for the first event matching `match`. */
  waitForEvent(worker: string, match: (event: WorkerEvent) => boolean, timeoutMs = 5000): Promise<WorkerEvent> {
    return eventually(() => {
      const found = this.events(worker).find(match)
      if (found === undefined) throw new Error(`no matching event of ${worker} in ${timeoutMs} ms: ${JSON.stringify(this.events(worker))}`)
      return found
    }, timeoutMs)
  }

  async stop(): Promise<void> {
    for (const stop of this.stops.reverse()) await stop()
    this.stops.length = 0
    await this.fleet.stop()
  }
}

// ---- steering and attesting ---------------------------------------------------------------------

/** An affinity value whose rendezvous choice among `workers` is `target` (docs/protocol.md "Resolution" step 6). */
export const affinityFor = (target: string, workers: ReadonlyArray<string>): string => {
  for (let i = 0; ; i++) {
    const value = `aff-${i}`
    const best = [...workers].sort((x, y) => (rendezvousScore(value, x) > rendezvousScore(value, y) ? -1 : 1))[0]
    if (best === target) return value
  }
}

const sign = makeAttestationSigner({ alg: "HS256", secret: attestationKey(TOKEN) })

/** A `Pinboard-Attestation` as Pinboard would mint it (docs/config.md), signed with `token`'s key. */
export const mintAttestation = (
  claims: Pick<AttestationClaims, "worker" | "namespace" | "id" | "epoch"> & Partial<AttestationClaims>,
  options: { readonly token?: string; readonly nowMs?: number } = {}
): string => {
  const signer = options.token === undefined ? sign : makeAttestationSigner({ alg: "HS256", secret: attestationKey(options.token) })
  return signer({ depth: 0, principal: undefined, caller: undefined, ...claims }, options.nowMs ?? Date.now())
}
