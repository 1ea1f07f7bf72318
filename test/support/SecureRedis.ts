// Redis as managed services run it, for tests: certificates made here with openssl (a CA, a
// server certificate for 127.0.0.1 and localhost, a client certificate), a redis-server that
// speaks TLS only, with the default user off and ACL users, and a Sentinel set (a master, a
// replica, three sentinels). Started on free loopback ports, stopped by pid.
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePort } from "./Ports.js"
import { poll } from "./Time.js"

export interface Certificates {
  readonly dir: string
  readonly ca: string
  readonly serverCert: string
  readonly serverKey: string
  readonly clientCert: string
  readonly clientKey: string
  /** A CA that signed nothing here: a client trusting only it must refuse the server. */
  readonly otherCa: string
}

const openssl = (dir: string, ...args: ReadonlyArray<string>) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" })

const signedBy = (dir: string, name: string, subject: string, extensions: string) => {
  openssl(dir, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", subject)
  writeFileSync(join(dir, `${name}.ext`), extensions)
  openssl(dir, "x509", "-req", "-in", `${name}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2", "-out", `${name}.crt`, "-extfile", `${name}.ext`)
}

export const makeCertificates = (): Certificates => {
  const dir = mkdtempSync(join(tmpdir(), "pinboard-tls-"))
  openssl(dir, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=Pinboard test CA")
  openssl(dir, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out", "other.crt", "-days", "2", "-subj", "/CN=Another CA")
  signedBy(dir, "server", "/CN=redis.test", "subjectAltName=DNS:localhost,DNS:redis.test,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
  signedBy(dir, "client", "/CN=pinboard", "extendedKeyUsage=clientAuth\n")
  const at = (file: string) => join(dir, file)
  return {
    dir,
    ca: at("ca.crt"),
    serverCert: at("server.crt"),
    serverKey: at("server.key"),
    clientCert: at("client.crt"),
    clientKey: at("client.key"),
    otherCa: at("other.crt")
  }
}

/** The tests' administrator on every secured server, for the harness's own commands. */
export const ADMIN = { user: "admin", password: "admin-secret" } as const

export interface SecureRedisOptions {
  readonly certificates: Certificates
  /** ACL rules after `user <name>`, one entry per user, e.g. `pinboard on >pw ~{pb:* +@all`. */
  readonly users: ReadonlyArray<string>
  /** `yes`: a client must present a certificate signed by the CA (mutual TLS). */
  readonly tlsAuthClients?: "yes" | "no"
}

export interface SecureRedis {
  readonly port: number
  readonly pid: number
  readonly cli: (...args: ReadonlyArray<string>) => string
  readonly stop: () => Promise<void>
}

const stopChild = (child: ChildProcess, dir: string) =>
  new Promise<void>((resolve) => {
    const done = () => {
      rmSync(dir, { recursive: true, force: true })
      resolve()
    }
    if (child.exitCode !== null || child.signalCode !== null) return done()
    child.once("exit", done)
    child.kill("SIGKILL")
  })

/** A redis-server on a TLS port only, default user off, the given ACL users and the harness's admin. */
export const startSecureRedis = async (options: SecureRedisOptions): Promise<SecureRedis> => {
  const { certificates: c } = options
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), "pinboard-redis-tls-"))
  const users = [`default off`, `${ADMIN.user} on >${ADMIN.password} ~* &* +@all`, ...options.users]
  writeFileSync(join(dir, "users.acl"), users.map((rule) => `user ${rule}\n`).join(""))
  const child = spawn(
    "redis-server",
    [
      "--port", "0",
      "--tls-port", String(port),
      "--bind", "127.0.0.1",
      "--tls-cert-file", c.serverCert,
      "--tls-key-file", c.serverKey,
      "--tls-ca-cert-file", c.ca,
      "--tls-auth-clients", options.tlsAuthClients ?? "no",
      "--aclfile", join(dir, "users.acl"),
      "--save", "",
      "--appendonly", "no",
      "--dir", dir,
      "--loglevel", "warning"
    ],
    { stdio: "ignore" }
  )
  const cli = (...args: ReadonlyArray<string>): string =>
    execFileSync(
      "redis-cli",
      ["--tls", "--cacert", c.ca, "--cert", c.clientCert, "--key", c.clientKey, "-h", "127.0.0.1", "-p", String(port), "--user", ADMIN.user, "--pass", ADMIN.password, "--no-auth-warning", ...args],
      { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 5000 }
    ).trim()
  const stop = () => stopChild(child, dir)
  try {
    await poll(
      () => {
        if (child.exitCode !== null) throw new Error(`redis-server on TLS port ${port} exited with ${child.exitCode}`)
        try {
          return cli("PING") === "PONG"
        } catch {
          return false
        }
      },
      { timeoutMs: 10_000, reason: `redis-server with TLS on ${port}` }
    )
  } catch (error) {
    await stop()
    throw error
  }
  return { port, pid: child.pid!, cli, stop }
}

/** The name the test sentinels monitor. */
export const SENTINEL_MASTER = "pinboard-master"
/** The sentinels' own password (`requirepass` in their configuration). */
export const SENTINEL_PASSWORD = "sentinel-secret"

export interface SentinelSet {
  /** `host:port,...` of the three sentinels. */
  readonly sentinels: string
  readonly masterPort: number
  readonly replicaPort: number
  /** Runs redis-cli as the admin on a data node. */
  readonly cli: (port: number, ...args: ReadonlyArray<string>) => string
  /** The master's port as the sentinels report it now. */
  readonly currentMasterPort: () => number | undefined
  /** Kills a data node's redis-server (SIGKILL). */
  readonly kill: (port: number) => Promise<void>
  /** Starts a killed data node again on its port, empty: the sentinels make it a replica of the master. */
  readonly restart: (port: number) => Promise<void>
  readonly stop: () => Promise<void>
}

interface Started {
  readonly child: ChildProcess
  readonly dir: string
}

const waitFor = async (what: string, child: ChildProcess, check: () => boolean): Promise<void> =>
  poll(
    () => {
      if (child.exitCode !== null) throw new Error(`${what} exited with ${child.exitCode}`)
      try {
        return check()
      } catch {
        return false
      }
    },
    { timeoutMs: 15_000, reason: what }
  ).then(() => undefined)

/**
 * A master and a replica (plain TCP, default user off, the admin and `users`), watched by three
 * sentinels (quorum 2, down after 1 s) that require SENTINEL_PASSWORD.
 */
export const startSentinelSet = async (users: ReadonlyArray<string>): Promise<SentinelSet> => {
  const started: Array<Started> = []
  const stopAll = () => Promise.all(started.map((s) => stopChild(s.child, s.dir))).then(() => undefined)
  const cli = (port: number, ...args: ReadonlyArray<string>): string =>
    execFileSync("redis-cli", ["-h", "127.0.0.1", "-p", String(port), "--user", ADMIN.user, "--pass", ADMIN.password, "--no-auth-warning", ...args], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 5000
    }).trim()
  const sentinelCli = (port: number, ...args: ReadonlyArray<string>): string =>
    execFileSync("redis-cli", ["-h", "127.0.0.1", "-p", String(port), "-a", SENTINEL_PASSWORD, "--no-auth-warning", ...args], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 5000
    }).trim()

  /** The data nodes by port: a killed one is started again on its port and directory. */
  const nodes = new Map<number, Started>()
  const launch = async (port: number, dir: string, replicaOf?: number): Promise<Started> => {
    const replication = ["--masteruser", ADMIN.user, "--masterauth", ADMIN.password, ...(replicaOf === undefined ? [] : ["--replicaof", "127.0.0.1", String(replicaOf)])]
    const child = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--aclfile", join(dir, "users.acl"), "--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning", ...replication],
      { stdio: "ignore" }
    )
    const node = { child, dir }
    started.push(node)
    nodes.set(port, node)
    await waitFor(`redis-server on ${port}`, child, () => cli(port, "PING") === "PONG")
    return node
  }
  const dataNode = async (replicaOf?: number): Promise<{ port: number; started: Started }> => {
    const port = await freePort()
    const dir = mkdtempSync(join(tmpdir(), "pinboard-redis-sentinel-"))
    const acl = [`default off`, `${ADMIN.user} on >${ADMIN.password} ~* &* +@all`, ...users]
    writeFileSync(join(dir, "users.acl"), acl.map((rule) => `user ${rule}\n`).join(""))
    return { port, started: await launch(port, dir, replicaOf) }
  }
  const nodeAt = (port: number): Started => {
    const node = nodes.get(port)
    if (node === undefined) throw new Error(`no data node on ${port}`)
    return node
  }

  try {
    const master = await dataNode()
    const replica = await dataNode(master.port)
    await waitFor("the replica in sync", replica.started.child, () => /master_link_status:up/.test(cli(replica.port, "INFO", "replication")))
    const sentinelPorts: Array<number> = []
    for (let i = 0; i < 3; i++) {
      const port = await freePort()
      const dir = mkdtempSync(join(tmpdir(), "pinboard-sentinel-"))
      const conf = join(dir, "sentinel.conf")
      writeFileSync(
        conf,
        [
          `port ${port}`,
          "bind 127.0.0.1",
          `dir ${dir}`,
          `requirepass ${SENTINEL_PASSWORD}`,
          `sentinel sentinel-pass ${SENTINEL_PASSWORD}`,
          `sentinel monitor ${SENTINEL_MASTER} 127.0.0.1 ${master.port} 2`,
          `sentinel down-after-milliseconds ${SENTINEL_MASTER} 1000`,
          `sentinel failover-timeout ${SENTINEL_MASTER} 4000`,
          `sentinel parallel-syncs ${SENTINEL_MASTER} 1`,
          `sentinel auth-user ${SENTINEL_MASTER} ${ADMIN.user}`,
          `sentinel auth-pass ${SENTINEL_MASTER} ${ADMIN.password}`,
          ""
        ].join("\n")
      )
      const child = spawn("redis-server", [conf, "--sentinel"], { stdio: "ignore" })
      started.push({ child, dir })
      sentinelPorts.push(port)
      await waitFor(`sentinel on ${port}`, child, () => sentinelCli(port, "PING") === "PONG")
    }
    // Each sentinel knows the replica and the two others before the test may fail the master.
    for (const port of sentinelPorts) {
      await waitFor(`sentinel on ${port} to know its peers`, started[0]!.child, () => {
        const master = sentinelCli(port, "SENTINEL", "master", SENTINEL_MASTER)
        return /num-other-sentinels\n2\b/.test(master) && /num-slaves\n1\b/.test(master)
      })
    }
    return {
      sentinels: sentinelPorts.map((port) => `127.0.0.1:${port}`).join(","),
      masterPort: master.port,
      replicaPort: replica.port,
      cli,
      currentMasterPort: () => {
        const answer = sentinelCli(sentinelPorts[0]!, "SENTINEL", "get-master-addr-by-name", SENTINEL_MASTER).split("\n")
        return answer.length === 2 ? Number(answer[1]) : undefined
      },
      kill: (port) => {
        const { child } = nodeAt(port)
        return new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve()
          child.once("exit", () => resolve())
          child.kill("SIGKILL")
        })
      },
      restart: async (port) => {
        await launch(port, nodeAt(port).dir)
      },
      stop: stopAll
    }
  } catch (error) {
    await stopAll()
    throw error
  }
}
