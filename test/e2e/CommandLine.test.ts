// The built binary's command line (docs/config.md "Command line"): help, version and config
// need no token; a usage error exits 2 before anything starts; flags win over the environment.
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { freePort, spawnProcess } from "../support/Processes.js"
import { scaled } from "../support/Time.js"

const MAIN = new URL("../../dist/main.js", import.meta.url).pathname
const VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version
const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("PINBOARD_")))

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs the binary to its end; a command that would serve instead is killed by the timeout and fails the test. */
const pinboard = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<Ran> =>
  new Promise((resolve) => {
    execFile(process.execPath, [MAIN, ...args], { env: { ...clean, ...env }, timeout: scaled(10_000) }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr })
    })
  })

const dir = mkdtempSync(join(tmpdir(), "pinboard-cli-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("pinboard's command line", () => {
  it("--help needs no token: the commands, every flag and variable with its default, the exit codes", async () => {
    for (const args of [["--help"], ["-h"], ["help"]]) {
      const { code, stdout, stderr } = await pinboard(args)
      expect([code, stderr]).toStrictEqual([0, ""])
      expect(stdout).toContain(`pinboard ${VERSION}`)
      for (const command of ["pinboard [serve]", "pinboard config", "pinboard inspect"]) expect(stdout).toContain(command)
      expect(stdout).toMatch(/--port N\s+PINBOARD_PORT\s+8080/)
      expect(stdout).toMatch(/--redis-url URL\s+PINBOARD_REDIS_URL\s+unset/)
      expect(stdout).toMatch(/PINBOARD_LEASE_MS\s+15000/)
      expect(stdout).toMatch(/PINBOARD_TOKEN\s+required/)
      expect(stdout).toMatch(/PINBOARD_KEEPALIVE_TIMEOUT_MS\s+75000/)
      expect(stdout).toMatch(/PINBOARD_DRAIN_DELAY_MS\s+0/)
      expect(stdout).toMatch(/PINBOARD_TRUSTED_PROXIES\s+none/)
      expect(stdout).toMatch(/Exit codes:\n {2}0 {2}stopped.*\n {2}1 {2}failed.*\n {2}2 {2}bad usage/)
    }
  })

  it("--version prints package.json's version", async () => {
    expect(await pinboard(["--version"])).toStrictEqual({ code: 0, stdout: `${VERSION}\n`, stderr: "" })
    expect((await pinboard(["-V"])).stdout).toBe(`${VERSION}\n`)
  })

  it("an unknown flag or command, or a flag without its value, exits 2 with the usage on stderr and starts nothing", async () => {
    for (const [args, message] of [
      [["--bogus"], "Unknown option '--bogus'."],
      [["--port"], "Option '--port <value>' argument missing"],
      [["start"], `unknown command "start"`]
    ] as const) {
      const { code, stdout, stderr } = await pinboard(args, { PINBOARD_TOKEN: "t", PINBOARD_PORT: String(await freePort()) })
      expect([code, stdout]).toStrictEqual([2, ""])
      expect(stderr).toContain(`pinboard: ${message}`)
      expect(stderr).toContain("Usage:\n  pinboard [serve] [FLAGS]")
    }
  })

  it("--port and --host win over PINBOARD_PORT and PINBOARD_HOST", async () => {
    const [flagPort, envPort] = [await freePort(), await freePort()]
    const child = spawnProcess(process.execPath, [MAIN, "--port", String(flagPort), "--host", "127.0.0.1"], {
      env: { ...clean, PINBOARD_TOKEN: "t", PINBOARD_PORT: String(envPort), PINBOARD_HOST: "0.0.0.0" }
    })
    try {
      await child.waitForLine(/listening/, 10_000)
      expect((await fetch(`http://127.0.0.1:${flagPort}/healthz`)).status).toBe(200)
      await expect(fetch(`http://127.0.0.1:${envPort}/healthz`)).rejects.toThrow()
    } finally {
      await child.kill()
    }
  })

  it("a bad flag value is named by its flag, exit 2", async () => {
    const { code, stderr } = await pinboard(["--port", "http"], { PINBOARD_TOKEN: "t" })
    expect(code).toBe(2)
    expect(stderr).toContain(`--port: expected an integer from 1 to 65535, got "http"`)
  })

  it("a port that cannot be bound exits 1, saying so", async () => {
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
    const port = (taken.address() as { port: number }).port
    try {
      const { code, stderr } = await pinboard(["--port", String(port), "--host", "127.0.0.1"], { PINBOARD_TOKEN: "t" })
      expect(code).toBe(1)
      expect(stderr).toBe(`pinboard: cannot listen on 127.0.0.1:${port}: the port is in use\n`)
    } finally {
      taken.close()
    }
  })

  it("config prints every option in effect with its source, secrets redacted", async () => {
    const file = join(dir, "pinboard.json")
    writeFileSync(file, JSON.stringify({ leaseMs: 5000, host: "10.1.2.3", providers: { staff: { type: "jwt", secret: "hmac-secret-value" } } }))
    const { code, stdout, stderr } = await pinboard(["config", "--config", file, "--host", "127.0.0.1", "--redis-url", "redis://:redis-password@r:6379"], {
      PINBOARD_TOKEN: "deployment-token-value",
      PINBOARD_BUCKETS: "32",
      PINBOARD_REDIS_USERNAME: "pinboard",
      PINBOARD_REDIS_PASSWORD: "acl-password-value",
      PINBOARD_REDIS_TLS: "1"
    })
    expect([code, stderr]).toStrictEqual([0, ""])
    const row = (path: string) => stdout.split("\n").find((line) => line.startsWith(`${path} `))?.split(/\s{2,}/)
    expect(row("host")).toStrictEqual(["host", "127.0.0.1", "flag --host"])
    expect(row("buckets")).toStrictEqual(["buckets", "32", "environment PINBOARD_BUCKETS"])
    expect(row("leaseMs")).toStrictEqual(["leaseMs", "5000", `file ${file}`])
    expect(row("port")).toStrictEqual(["port", "8080", "default"])
    expect(row("metrics.port")).toStrictEqual(["metrics.port", "unset", "default"])
    expect(row("token")).toStrictEqual(["token", "(redacted)", "environment PINBOARD_TOKEN"])
    expect(row("providers.staff.secret")).toStrictEqual(["providers.staff.secret", "(redacted)", `file ${file}`])
    expect(row("redis.url")).toStrictEqual(["redis.url", "redis://:redacted@r:6379", "flag --redis-url"])
    expect(row("redis.username")).toStrictEqual(["redis.username", "pinboard", "environment PINBOARD_REDIS_USERNAME"])
    expect(row("redis.password")).toStrictEqual(["redis.password", "(redacted)", "environment PINBOARD_REDIS_PASSWORD"])
    expect(row("redis.tls")).toStrictEqual(["redis.tls", "true", "environment PINBOARD_REDIS_TLS"])
    expect(row("redis.sentinelPassword")).toStrictEqual(["redis.sentinelPassword", "unset", "default"])
    for (const secret of ["deployment-token-value", "hmac-secret-value", "redis-password", "acl-password-value"]) expect(stdout).not.toContain(secret)
  })

  it("config with an invalid configuration exits 2 naming the mistake", async () => {
    const { code, stdout, stderr } = await pinboard(["config"], {})
    expect([code, stdout]).toStrictEqual([2, ""])
    expect(stderr).toContain("token: required")
  })

  it("a mistyped PINBOARD_* variable exits 2 naming the nearest known one, before anything starts", async () => {
    const { code, stdout, stderr } = await pinboard([], { PINBOARD_TOKEN: "t", PINBOARD_PORT: "1", PINBOARD_REDIS_CLUSTR: "10.0.0.1:6379" })
    expect([code, stdout]).toStrictEqual([2, ""])
    expect(stderr).toBe("pinboard: invalid configuration: PINBOARD_REDIS_CLUSTR: unknown variable; did you mean PINBOARD_REDIS_CLUSTER?\n")
  })
})
