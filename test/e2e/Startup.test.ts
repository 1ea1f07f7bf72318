// The built binary: an invalid configuration exits 2 naming the field; SIGTERM exits 0.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { freePort, spawnProcess } from "../support/Processes.js"

const MAIN = new URL("../../dist/main.js", import.meta.url).pathname

const run = (env: Record<string, string>, args: ReadonlyArray<string> = []) => {
  if (!existsSync(MAIN)) throw new Error("dist/main.js is missing: run `npm run build` before the end-to-end tests")
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("PINBOARD_")))
  return spawnProcess(process.execPath, [MAIN, ...args], { env: { ...clean, ...env } })
}

describe("pinboard binary", () => {
  it.each([
    [{ PINBOARD_PORT: "8080" }, /token/],
    [{ PINBOARD_TOKEN: "t", PINBOARD_PORT: "abc" }, /PINBOARD_PORT: expected an integer/],
    [{ PINBOARD_TOKEN: "t", PINBOARD_LEASE_MS: "-5" }, /PINBOARD_LEASE_MS/],
    [{ PINBOARD_TOKEN: "t", PINBOARD_REDIS_URL: "http://nope" }, /PINBOARD_REDIS_URL/],
    [{ PINBOARD_TOKEN: "t", PINBOARD_CONFIG: "/nonexistent/pinboard.json" }, /config file/],
    [{ PINBOARD_TOKEN: "t", PINBOARD_HOSTNAME_AWARE: "yes" }, /PINBOARD_HOSTNAME_AWARE: expected 1, 0, true or false/]
  ])("exits 2 with a message naming the field: %j", async (env, message) => {
    const child = run(env)
    expect(await child.exited).toEqual({ code: 2, signal: null })
    expect(child.lines.join("\n")).toMatch(message)
  })

  it("names the rule field at fault in a config file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "pinboard-config-"))
    const file = join(dir, "pinboard.json")
    writeFileSync(file, JSON.stringify({ token: "t", namespaces: [{ namespace: "/public", auth: "required", providers: ["nobody"] }] }))
    const child = run({}, ["--config", file])
    expect(await child.exited).toEqual({ code: 2, signal: null })
    expect(child.lines.join("\n")).toMatch(/namespaces\[0\]\.providers\[0\]: expected the name of a provider/)
    rmSync(dir, { recursive: true, force: true })
  })

  it("answers the probes, and exits 0 on SIGTERM", async () => {
    const port = await freePort()
    const child = run({ PINBOARD_TOKEN: "t", PINBOARD_PORT: String(port), PINBOARD_HOST: "127.0.0.1" })
    try {
      await child.waitForLine(/listening/, 10_000)
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`)
      expect(ready.status).toBe(200)
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200)
      process.kill(child.pid, "SIGTERM")
      expect(await child.exited).toEqual({ code: 0, signal: null })
    } finally {
      await child.kill()
    }
  })
})
