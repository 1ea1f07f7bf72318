// The fleet page (docs/operations.md "The fleet page") in a real headless Chromium: the built
// Pinboard on Redis with its metrics listener, two fixture workers and a draining one the test
// heartbeats itself, ids placed and errors answered by real requests; the page must show every
// worker's lease left, headroom, state and placements (as the registry's rows give them), this
// Pinboard's rates, refresh without a reload, and render registry text as text. It takes a
// screenshot too: the one docs/operations.md shows (docs/images/fleet.png) when
// PINBOARD_UPDATE_SCREENSHOT=1, else into a temporary folder, so a test run leaves docs/ alone.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  coldStartIds,
  Fleet,
  placementOf,
  uid,
  waitForColdStart,
  type Pinboard,
  type VirtualWorker,
  type Worker
} from "../support/Fleet.js"
import { launchChromium } from "../support/Chromium.js"
import { freePort } from "../support/Processes.js"
import { poll, scaled } from "../support/Time.js"
import { request } from "../support/Wire.js"

const DOCS_SCREENSHOT = new URL("../../docs/images/fleet.png", import.meta.url).pathname
const AFFINITY = "x-affinity"
/** Registry text that would be markup if the page wrote it as HTML. */
const MARKUP_URL = 'http://127.0.0.1:9/<img src=x id="injected">'

const fleet = new Fleet()
const userDataDir = mkdtempSync(join(tmpdir(), "pinboard-chromium-"))
const screenshot = process.env.PINBOARD_UPDATE_SCREENSHOT === "1" ? DOCS_SCREENSHOT : join(userDataDir, "fleet.png")
let pinboard: Pinboard
let metricsPort: number
let a: Worker
let b: Worker
let c: VirtualWorker
let browser: BrowserContext
let page: Page
/** Every id this file placed, the cold start's included. */
const placed: Array<string> = []

beforeAll(async () => {
  try {
    const redis = await fleet.redis()
    metricsPort = await freePort()
    // Affinity by a header, so that one client spreads its ids over both workers.
    pinboard = await fleet.pinboard({ redis, config: { metrics: { port: metricsPort }, affinity: { key: `header:${AFFINITY}` } } })
    ;[a, b, c] = await Promise.all([
      fleet.worker(pinboard, { id: uid("alpha"), namespaces: ["/threads"], headroom: 7 }),
      // Headrooms close enough that each worker's rendezvous preference holds (docs/inspect.md).
      fleet.worker(pinboard, { id: uid("beta"), namespaces: ["/threads"], headroom: 5 }),
      fleet.virtualWorker(pinboard, { id: uid("gamma"), advertiseUrl: "http://127.0.0.1:9", namespaces: ["/threads"], draining: true })
    ])
    await waitForColdStart(pinboard, "/threads")
    placed.push(...coldStartIds("/threads").values())
    browser = await launchChromium(userDataDir, { viewport: { width: 1280, height: 720 } })
    page = await browser.newPage()
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

const FIELDS = ["worker", "state", "lease-left", "headroom", "placements", "nacks", "namespaces", "advertise-url"] as const

/** What the page shows for one worker, cell by cell (worker ids need no quoting in a selector). */
const rowOf = async (worker: string): Promise<Record<(typeof FIELDS)[number], string> | undefined> => {
  const row = page.locator(`#workers tr[data-worker="${worker}"]`)
  if ((await row.count()) !== 1) return undefined
  const cells = await Promise.all(FIELDS.map(async (field) => [field, (await row.locator(`td[data-field="${field}"]`).textContent()) ?? ""] as const))
  return Object.fromEntries(cells) as Record<(typeof FIELDS)[number], string>
}

const textOf = async (selector: string): Promise<string> => (await page.locator(selector).textContent()) ?? ""

/** Requests for ids already placed: served (200) and worker errors (500), until `stop`. */
const steadyTraffic = () => {
  let running = true
  const done = (async () => {
    for (let i = 0; running; i++) {
      const id = placed[placed.length - 1 - (i % 8)]!
      const path = i % 4 === 0 ? `/threads/${id}/status/500` : `/threads/${id}/echo`
      await request(pinboard, path, { headers: [[AFFINITY, id]] })
    }
  })()
  return async () => {
    running = false
    await done
  }
}

describe("the fleet page in Chromium", () => {
  it("shows every worker's lease left, headroom, state and placements, this Pinboard's rates, and refreshes without a reload", async () => {
    for (let i = 0; i < 16; i++) {
      const id = uid("t")
      const answer = await request(pinboard, `/threads/${id}/echo`, { headers: [[AFFINITY, id]] })
      expect(answer.status).toBe(200)
      placed.push(id)
    }
    const expected = new Map<string, number>([[a.id, 0], [b.id, 0], [c.id, 0]])
    for (const id of placed) {
      const row = await placementOf(pinboard, "/threads", id)
      expect(row?.live).toBe(true)
      expected.set(row!.worker, expected.get(row!.worker)! + 1)
    }
    expect(expected.get(a.id)! + expected.get(b.id)!).toBe(placed.length)
    expect(expected.get(b.id)).toBeGreaterThan(0)

    const stopTraffic = steadyTraffic()
    try {
      await page.goto(fleetUrl("/fleet"))
      await page.evaluate("window.loadedOnce = true")

      const shown = await poll(
        async () => {
          const rows = await Promise.all([a.id, b.id, c.id].map(rowOf))
          const requests = Number(await textOf("#requests-rate"))
          const errors = Number(await textOf("#errors-rate"))
          return rows.every((row) => row !== undefined) && requests > 0 && errors > 0 ? { rows, requests, errors } : undefined
        },
        { timeoutMs: 20_000, reason: "the page listing the three workers with non-zero rates" }
      )
      const [alpha, beta, gamma] = shown.rows
      expect(alpha).toMatchObject({ worker: a.id, state: "live", headroom: "7", placements: String(expected.get(a.id)), namespaces: "/threads" })
      expect(beta).toMatchObject({ worker: b.id, state: "live", headroom: "5", placements: String(expected.get(b.id)) })
      expect(gamma).toMatchObject({ worker: c.id, state: "draining", headroom: "10", placements: "0", "advertise-url": "http://127.0.0.1:9" })
      for (const row of shown.rows) {
        const leaseLeft = Number(row!["lease-left"])
        expect(leaseLeft).toBeGreaterThan(0)
        expect(leaseLeft).toBeLessThanOrEqual(pinboard.leaseMs / 1000)
      }
      expect(await textOf("#status")).toBe("live")
      // Without `credentials` no key is asked for.
      expect(await page.locator("#key-form").isVisible()).toBe(false)

      // Refreshed in place: the registry read's time moves on, the page object is the same one.
      const firstRead = await page.getAttribute("#updated", "data-now")
      await poll(async () => (await page.getAttribute("#updated", "data-now")) !== firstRead, {
        timeoutMs: 10_000,
        reason: "the page reading the registry again"
      })
      expect(await page.evaluate("window.loadedOnce")).toBe(true)

      await page.screenshot({ path: screenshot, fullPage: true })
    } finally {
      await stopTraffic()
    }
  })

  it("writes registry text as text: markup in an advertiseUrl makes no element", async () => {
    const marked = await fleet.virtualWorker(pinboard, { id: uid("delta"), advertiseUrl: MARKUP_URL, namespaces: ["/threads"], draining: true })
    await page.goto(fleetUrl("/fleet"))
    const row = await poll(async () => rowOf(marked.id), { timeoutMs: 10_000, reason: "the page listing the new worker" })
    expect(row["advertise-url"]).toBe(MARKUP_URL)
    expect(await page.locator("#injected").count()).toBe(0)
  })

  it("serves the page, its script and its JSON with GET and HEAD only; the page loads nothing from elsewhere", async () => {
    for (const [path, type] of [
      ["/fleet", "text/html; charset=utf-8"],
      ["/fleet.js", "text/javascript; charset=utf-8"],
      ["/fleet.json", "application/json"]
    ] as const) {
      const get = await request({ port: metricsPort }, path)
      expect({ path, status: get.status, type: get.headers["content-type"] }).toEqual({ path, status: 200, type })
      const head = await request({ port: metricsPort }, path, { method: "HEAD" })
      expect({ path, status: head.status, body: head.text }).toEqual({ path, status: 200, body: "" })
      const post = await request({ port: metricsPort }, path, { method: "POST", body: "x" })
      expect({ path, status: post.status, allow: post.headers["allow"], body: post.text }).toEqual({
        path,
        status: 405,
        allow: "GET, HEAD",
        body: "method not allowed"
      })
    }
    expect((await request({ port: metricsPort }, "/fleet/")).status).toBe(404)
    const html = (await request({ port: metricsPort }, "/fleet")).text
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//)
    const json = JSON.parse((await request({ port: metricsPort }, "/fleet.json")).text) as Record<string, unknown>
    expect(Object.keys(json)).toEqual(["now", "leaseMs", "buckets", "uncountedBuckets", "workers", "rates"])
  })
})
