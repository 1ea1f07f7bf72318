// A real nginx (Debian's /usr/sbin/nginx; .ci/run installs it) in front of Pinboard replicas,
// run by a test as its own process: a temporary prefix directory, a generated nginx.conf whose
// `http` block is the configuration docs/deploy.md gives (NginxSite.ts) with what a test
// process needs around it (no daemon, its pid file, logs and temporary paths in the prefix, free
// loopback ports, an access log that names each request's upstream tries), reloaded by SIGHUP
// and stopped by its pid.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir, userInfo } from "node:os"
import { join } from "node:path"
import { nginxSite, type NginxReplica } from "./NginxSite.js"
import { freePort, isAlive, killPid, spawnProcess, waitForPidGone, waitForPort, type Spawned } from "./Processes.js"
import { childrenOf, establishedConnections } from "./Sockets.js"
import { poll, scaled } from "./Time.js"

const NGINX = "/usr/sbin/nginx"

/** One line of the access log: a request nginx served, and every upstream it tried for it. */
export interface NginxAccess {
  readonly remote: string
  readonly request: string
  readonly status: number
  /** `$upstream_addr`: one address, or several (`a, b`) when nginx passed the request on. */
  readonly upstream: string
  readonly upstreamStatus: string
  readonly serverPort: number
  /** When nginx read the request (ms since the epoch, as Date.now()). */
  readonly startedAt: number
}

export interface Nginx {
  /** The clients' listener. */
  readonly port: number
  readonly url: string
  /** The workers' listener (the registry API). */
  readonly registryPort: number
  readonly registryUrl: string
  /** The master process. */
  readonly pid: number
  readonly process: Spawned
  /** Writes the site with `replicas` and reloads; resolves once only workers of the new configuration run. */
  readonly reconfigure: (replicas: ReadonlyArray<NginxReplica>) => Promise<void>
  readonly accessLog: () => Array<NginxAccess>
  readonly errorLog: () => Array<string>
  /** The local ports of nginx's established connections to 127.0.0.1:`port`, sorted. */
  readonly connectionsTo: (port: number) => Array<number>
  readonly stop: () => Promise<void>
}

const LOG_FORMAT =
  `log_format pinboard_test escape=json '{"remote":"$remote_addr","request":"$request","status":"$status",` +
  `"upstream":"$upstream_addr","upstream_status":"$upstream_status","server_port":"$server_port",` +
  `"msec":"$msec","request_time":"$request_time"}';`

/** nginx.conf: the test process's settings around the documented site. */
interface NginxPorts {
  readonly data: number
  readonly registry: number
  /** The test's own listener, which says which configuration serves. */
  readonly control: number
}

const nginxConf = (dir: string, ports: NginxPorts, replicas: ReadonlyArray<NginxReplica>, generation: number) =>
  [
    "daemon off;",
    "master_process on;",
    // One worker: one cache of upstream keep-alive connections, which the test reads.
    "worker_processes 1;",
    // As root, workers would switch to www-data, who cannot enter the private prefix directory.
    ...(userInfo().uid === 0 ? ["user root;"] : []),
    `pid ${dir}/nginx.pid;`,
    `error_log ${dir}/error.log notice;`,
    "events { worker_connections 1024; }",
    "http {",
    LOG_FORMAT,
    `access_log ${dir}/access.log pinboard_test;`,
    ...["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map((kind) => `${kind}_temp_path ${dir}/${kind}_temp;`),
    // Which configuration serves: a reload is over once the new one answers here.
    `server { listen 127.0.0.1:${ports.control}; location = /generation { return 200 "${generation}"; } }`,
    nginxSite({ listen: `127.0.0.1:${ports.data}`, registryListen: `127.0.0.1:${ports.registry}`, replicas }),
    "}",
    ""
  ].join("\n")

const generationOf = (port: number): Promise<string | undefined> =>
  fetch(`http://127.0.0.1:${port}/generation`, { signal: AbortSignal.timeout(scaled(1000)) }).then(
    (res) => res.text(),
    () => undefined
  )

export const startNginx = async (replicas: ReadonlyArray<NginxReplica>): Promise<Nginx> => {
  if (!existsSync(NGINX)) throw new Error(`${NGINX} is missing: install Debian's nginx package (.ci/run does)`)
  const dir = mkdtempSync(join(tmpdir(), "pinboard-nginx-"))
  const ports = { data: await freePort(), registry: await freePort(), control: await freePort() }
  const conf = join(dir, "nginx.conf")
  const errorLogFile = join(dir, "error.log")
  const accessLogFile = join(dir, "access.log")
  let generation = 1
  writeFileSync(conf, nginxConf(dir, ports, replicas, generation))
  // -e: the error log from the start, before the configuration names it (not /var/log/nginx).
  const child = spawnProcess(NGINX, ["-p", `${dir}/`, "-c", conf, "-e", errorLogFile], {}, { name: "nginx" })
  const errorLog = () => (existsSync(errorLogFile) ? readFileSync(errorLogFile, "utf8").split("\n").filter((line) => line !== "") : [])
  const stop = async () => {
    if (child.alive()) {
      const workers = childrenOf(child.pid)
      killPid(child.pid, "SIGTERM")
      if (!(await waitForPidGone(child.pid, 5_000))) {
        killPid(child.pid, "SIGKILL")
        for (const worker of workers) killPid(worker, "SIGKILL")
      }
      await child.exited
    }
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await waitForPort(ports.data, 10_000)
    await poll(async () => (await generationOf(ports.control)) === "1", { timeoutMs: 10_000, reason: "nginx's first configuration" })
  } catch (error) {
    const log = errorLog().join("\n")
    await stop()
    throw new Error(`${(error as Error).message}; nginx's error log:\n${log}`)
  }

  const reconfigure = async (next: ReadonlyArray<NginxReplica>) => {
    const before = childrenOf(child.pid)
    generation += 1
    writeFileSync(conf, nginxConf(dir, ports, next, generation))
    killPid(child.pid, "SIGHUP")
    const wanted = String(generation)
    await poll(async () => (await generationOf(ports.control)) === wanted && before.every((pid) => !isAlive(pid)), {
      timeoutMs: 10_000,
      reason: `nginx's configuration ${wanted} alone`
    }).catch((error: Error) => {
      throw new Error(`${error.message}; nginx's error log:\n${errorLog().join("\n")}`)
    })
  }

  const accessLog = (): Array<NginxAccess> =>
    (existsSync(accessLogFile) ? readFileSync(accessLogFile, "utf8").split("\n") : [])
      .filter((line) => line !== "")
      .map((line) => {
        const raw = JSON.parse(line) as Record<string, string>
        return {
          remote: raw.remote!,
          request: raw.request!,
          status: Number(raw.status),
          upstream: raw.upstream!,
          upstreamStatus: raw.upstream_status!,
          serverPort: Number(raw.server_port),
          // $msec is when the line was written, $request_time how long the request took, both in seconds.
          startedAt: Math.round((Number(raw.msec) - Number(raw.request_time)) * 1000)
        }
      })

  const connectionsTo = (port: number) =>
    establishedConnections(child.pid)
      .filter((connection) => connection.remoteAddress === "127.0.0.1" && connection.remotePort === port)
      .map((connection) => connection.localPort)
      .sort((a, b) => a - b)

  return {
    port: ports.data,
    url: `http://127.0.0.1:${ports.data}`,
    registryPort: ports.registry,
    registryUrl: `http://127.0.0.1:${ports.registry}`,
    pid: child.pid,
    process: child,
    reconfigure,
    accessLog,
    errorLog,
    connectionsTo,
    stop
  }
}
