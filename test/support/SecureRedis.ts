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
