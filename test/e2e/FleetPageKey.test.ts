// The fleet page with `credentials` (docs/operations.md "The fleet page"): the built Pinboard on
// Redis with a credentials file (an operator key and a worker key) and its metrics listener.
// `/fleet.json` answers only an operator credential (the deployment token or an operator key);
// the page and its script stay open (they hold no data), and so does `/metrics`. In a real
// headless Chromium the page asks for a key, shows a refused key's refusal, shows the workers
// with an operator key, and keeps the key for the tab alone (sessionStorage), never in a URL.
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { keyLine, writeAttestationKey, writeCredentials } from "../support/CredentialFiles.js"
import { Fleet, TOKEN, uid, type Pinboard, type VirtualWorker } from "../support/Fleet.js"
import { launchChromium } from "../support/Chromium.js"
import { freePort } from "../support/Processes.js"
import { poll, scaled } from "../support/Time.js"
import { request } from "../support/Wire.js"

const OPERATOR_KEY = `op-${randomBytes(16).toString("hex")}`
const WORKER_KEY = `chat-${randomBytes(16).toString("hex")}`
const UNKNOWN_KEY = `nobody-${randomBytes(16).toString("hex")}`
/** The page's Content-Security-Policy as it was before keys: no looser with them. */
const PAGE_POLICY =
  "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const fleet = new Fleet()
const userDataDir = mkdtempSync(join(tmpdir(), "pinboard-chromium-"))
let pinboard: Pinboard
let metricsPort: number
let workers: ReadonlyArray<VirtualWorker>
let browser: BrowserContext

beforeAll(async () => {
  try {
    const attestationPem = writeAttestationKey(fleet.dir)
    const credentialsFile = writeCredentials(fleet.dir, {
      operators: [{ name: "oncall", sha256: keyLine(OPERATOR_KEY) }],
      workers: [{ name: "chat", sha256: keyLine(WORKER_KEY), workers: ["chat-*"], namespaces: ["/threads"] }]
    })
    metricsPort = await freePort()
    pinboard = await fleet.pinboard({
      redis: await fleet.redis(),
      config: { metrics: { port: metricsPort } },
      env: { PINBOARD_CREDENTIALS_FILE: credentialsFile, PINBOARD_ATTESTATION_KEYS: attestationPem }
    })
    // Registered with the deployment token, an operator credential here.
    workers = await Promise.all(
      ["chat", "docs"].map((label) => fleet.virtualWorker(pinboard, { id: uid(label), advertiseUrl: "http://127.0.0.1:9", namespaces: ["/threads"] }))
    )
    browser = await launchChromium(userDataDir, { viewport: { width: 1280, height: 720 } })
  } catch (error) {
    await fleet.stop()
    throw error
  }
}, scaled(90_000))

afterAll(async () => {
  await browser?.close()
  await fleet.stop()
  rmSync(userDataDir, { recursive: true, force: true })
})

const fleetUrl = (path: string) => `http://127.0.0.1:${metricsPort}${path}`

const fleetJson = (authorization?: string, method = "GET") =>
  request({ port: metricsPort }, "/fleet.json", { method, headers: authorization === undefined ? {} : { authorization } })

/** The worker ids a page lists, once it lists every worker this file registered. */
const listed = (page: Page) =>
  poll(
    async () => {
      const ids = await page.locator("#workers tr").evaluateAll((rows) => rows.map((row) => row.getAttribute("data-worker")))
      return workers.every((worker) => ids.includes(worker.id)) ? ids : undefined
    },
    { timeoutMs: 10_000, reason: "the page listing the registered workers" }
  )

const asksForKey = (page: Page) => page.locator("#key-form").waitFor({ state: "visible", timeout: scaled(10_000) })

const submitKey = async (page: Page, key: string) => {
  await page.fill("#key-input", key)
  await page.click("#key-form button[type=submit]")
}

describe("the fleet page with credentials", () => {
  it("answers fleet.json to an operator credential only: 401 without one or with an unknown key, 403 to a worker key", async () => {
    const refusedWith = async (authorization: string | undefined, status: number, error: string) => {
      const answer = await fleetJson(authorization)
      expect({ authorization, status: answer.status, type: answer.headers["content-type"], body: answer.text }).toEqual({
        authorization,
        status,
        type: "application/json",
        body: JSON.stringify({ error })
      })
    }
    await refusedWith(undefined, 401, "invalid deployment token")
    await refusedWith(`Bearer ${UNKNOWN_KEY}`, 401, "invalid deployment token")
    await refusedWith(OPERATOR_KEY, 401, "invalid deployment token")
    await refusedWith(`Bearer ${WORKER_KEY}`, 403, "operator credential required")
    expect((await fleetJson(undefined, "HEAD")).status).toBe(401)

    for (const key of [OPERATOR_KEY, TOKEN]) {
      const answer = await fleetJson(`Bearer ${key}`)
      expect(answer.status).toBe(200)
      const ids = (JSON.parse(answer.text) as { workers: Array<{ worker: string }> }).workers.map((w) => w.worker)
      expect(ids).toEqual(expect.arrayContaining(workers.map((worker) => worker.id)))
    }
  })

  it("serves the page, its script and /metrics without a key, the page under the same policy", async () => {
    const page = await request({ port: metricsPort }, "/fleet")
    expect({ status: page.status, policy: page.headers["content-security-policy"] }).toEqual({ status: 200, policy: PAGE_POLICY })
    expect((await request({ port: metricsPort }, "/fleet.js")).status).toBe(200)
    const metrics = await request({ port: metricsPort }, "/metrics")
    expect(metrics.status).toBe(200)
    expect(metrics.text).toContain("pinboard_requests_total")
  })

  it("in Chromium: asks for a key, shows a refused key's refusal, shows the workers with an operator key and keeps it for the tab", async () => {
    const page = await browser.newPage()
    const polls: Array<{ url: string; authorization: string | undefined }> = []
    page.on("request", (req) => {
      if (req.url().includes("fleet.json")) polls.push({ url: req.url(), authorization: req.headers()["authorization"] })
    })
    await page.goto(fleetUrl("/fleet"))
    await asksForKey(page)
    expect(await page.locator("#workers tr").count()).toBe(0)

    await submitKey(page, UNKNOWN_KEY)
    await poll(async () => (await page.locator("#key-refused").textContent())?.includes("invalid deployment token"), {
      timeoutMs: 10_000,
      reason: "the unknown key's refusal shown"
    })
    await asksForKey(page)
    await submitKey(page, WORKER_KEY)
    await poll(async () => (await page.locator("#key-refused").textContent())?.includes("operator credential required"), {
      timeoutMs: 10_000,
      reason: "the worker key's refusal shown"
    })
    await asksForKey(page)
    expect(await page.locator("#workers tr").count()).toBe(0)

    await submitKey(page, OPERATOR_KEY)
    await listed(page)
    expect(await page.locator("#key-form").isVisible()).toBe(false)
    expect(await page.locator("#status").textContent()).toBe("live")
    // Every poll after the key was taken carries it; the page keeps polling.
    const taken = polls.length
    await poll(async () => polls.length >= taken + 2, { timeoutMs: 10_000, reason: "two more polls" })
    expect(polls.slice(taken - 1).every((p) => p.authorization === `Bearer ${OPERATOR_KEY}`)).toBe(true)

    // Kept in this tab's sessionStorage: a reload shows the workers without asking.
    await page.reload()
    await listed(page)
    expect(await page.locator("#key-form").isVisible()).toBe(false)
    const storage = await page.evaluate(() => ({ session: Object.values(sessionStorage), local: localStorage.length }))
    expect(storage).toEqual({ session: [OPERATOR_KEY], local: 0 })
    for (const key of [OPERATOR_KEY, WORKER_KEY, UNKNOWN_KEY]) {
      expect(polls.filter((p) => p.url.includes(encodeURIComponent(key)) || p.url.includes(key))).toEqual([])
      expect(page.url()).not.toContain(key)
    }

    // Another tab has its own sessionStorage: asked again.
    const other = await browser.newPage()
    await other.goto(fleetUrl("/fleet"))
    await asksForKey(other)
    await other.close()
    await page.close()
  })
})
