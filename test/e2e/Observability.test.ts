// Observability end to end (docs/operations.md): the built Pinboard's Prometheus metrics on
// their own listener (`metrics.port`), counted exactly after known traffic; the listener's
// routes; the data-plane port never serving them; and the JSON log lines on stdout, the
// access log (`log.access`) and `log.level`.
import { readdirSync, readFileSync, readlinkSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { eventually, Fleet, uid, waitForColdStart, type Pinboard, type Worker } from "../support/Fleet.js"
import { freePort } from "../support/Processes.js"
import { rawConnection, rawRequestHead, request, type Answer } from "../support/Wire.js"
import { scaled } from "../support/Time.js"

// ---- the Prometheus text format (0.0.4), parsed here ------------------------------------------

type Labels = Readonly<Record<string, string>>

interface Sample {
  readonly name: string
  readonly labels: Labels
  readonly value: number
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/

const numberOf = (text: string): number =>
  text === "+Inf" ? Infinity : text === "-Inf" ? -Infinity : text === "NaN" ? NaN : Number(text)

/** One sample line: `name{label="value",...} value [timestamp]`; comments and blank lines are skipped by the caller. */
const parseSampleLine = (line: string): Sample => {
  const name = NAME.exec(line)?.[0]
  if (name === undefined) throw new Error(`no metric name in ${JSON.stringify(line)}`)
  let at = name.length
  const labels: Record<string, string> = {}
  if (line[at] === "{") {
    at++
    for (;;) {
      if (line[at] === "}") break
      const label = LABEL_NAME.exec(line.slice(at))?.[0]
      if (label === undefined || line[at + label.length] !== "=" || line[at + label.length + 1] !== '"') {
        throw new Error(`bad label at ${at} in ${JSON.stringify(line)}`)
      }
      at += label.length + 2
      let value = ""
      for (;;) {
        const c = line[at++]
        if (c === undefined) throw new Error(`unterminated label value in ${JSON.stringify(line)}`)
        if (c === '"') break
        if (c === "\\") {
          const escaped = line[at++]
          value += escaped === "n" ? "\n" : escaped
        } else value += c
      }
      labels[label] = value
      if (line[at] === ",") at++
    }
    at++
  }
  const [value, ...more] = line.slice(at).trim().split(/\s+/)
  if (value === undefined || value === "" || more.length > 1) throw new Error(`bad sample value in ${JSON.stringify(line)}`)
  return { name, labels, value: numberOf(value) }
}

class Scrape {
  constructor(readonly samples: ReadonlyArray<Sample>) {}

  static parse(text: string): Scrape {
    return new Scrape(
      text
        .split("\n")
        .filter((line) => line.trim() !== "" && !line.startsWith("#"))
        .map(parseSampleLine)
    )
  }

  /** The sample with exactly these labels, or undefined when there is no such series. */
  get(name: string, labels: Labels = {}): number | undefined {
    const wanted = Object.entries(labels)
    const found = this.samples.filter(
      (s) => s.name === name && Object.keys(s.labels).length === wanted.length && wanted.every(([k, v]) => s.labels[k] === v)
    )
    if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} appears ${found.length} times`)
    return found[0]?.value
  }

  /** A counter's value, 0 when the series does not exist yet. */
  count(name: string, labels: Labels = {}): number {
    return this.get(name, labels) ?? 0
  }

  /** Every series of `name`. */
  series(name: string): ReadonlyArray<Sample> {
    return this.samples.filter((s) => s.name === name)
  }
}

/** A request to the metrics listener; with a Host header, as HTTP/1.1 (and Prometheus) sends it. */
const toMetrics = (port: number, path: string, options: { readonly method?: string; readonly body?: string } = {}): Promise<Answer> =>
  request({ port }, path, { ...options, headers: [["Host", `127.0.0.1:${port}`]] })

const scrape = async (metricsPort: number): Promise<Scrape> => {
  const res = await toMetrics(metricsPort, "/metrics")
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status} ${res.text}`)
  return Scrape.parse(res.text)
}

/** How much each counter grew between two scrapes. */
const grew = (before: Scrape, after: Scrape, name: string, labels: Labels = {}): number =>
  after.count(name, labels) - before.count(name, labels)

// ---- log lines ------------------------------------------------------------------------------

interface LogLine {
  readonly time: string
  readonly level: string
  readonly message: string
  readonly [field: string]: unknown
}

const LEVELS = ["debug", "info", "warning", "error"]

/** Every line the process printed, parsed; throws naming the first line that is not a log line. */
const logLines = (pinboard: Pinboard): Array<LogLine> =>
  pinboard.process.lines.map((text) => {
    let line: unknown
    try {
      line = JSON.parse(text)
    } catch {
      throw new Error(`not a JSON line: ${text}`)
    }
    if (typeof line !== "object" || line === null || Array.isArray(line)) throw new Error(`not a JSON object: ${text}`)
    const { time, level, message } = line as Record<string, unknown>
    if (typeof time !== "string" || Number.isNaN(Date.parse(time)) || new Date(time).toISOString() !== time) {
      throw new Error(`time is not an ISO timestamp: ${text}`)
    }
    if (typeof level !== "string" || !LEVELS.includes(level)) throw new Error(`level is not one of ${LEVELS.join(", ")}: ${text}`)
    if (typeof message !== "string") throw new Error(`message is not a string: ${text}`)
    return line as LogLine
  })

const accessLines = (pinboard: Pinboard): Array<LogLine> => logLines(pinboard).filter((line) => line.message === "access")

/** The access lines for `path`, once there are `count` of them (they are written when the exchange closes). */
const accessFor = (pinboard: Pinboard, path: string, count = 1): Promise<Array<LogLine>> =>
  eventually(() => {
    const lines = accessLines(pinboard).filter((line) => line.path === path)
    expect(lines).toHaveLength(count)
    return lines
  })

const EMBEDDED_WARNING = "no Redis configured: using the embedded registry (one Pinboard process only)"

// ---- what a process listens on (Linux /proc) ----------------------------------------------------

/** The TCP ports the process has in LISTEN state, from its socket fds and /proc/net/tcp{,6}. */
const listeningPorts = (pid: number): Array<number> => {
  const inodes = new Set<string>()
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (match) inodes.add(match[1]!)
    } catch {
      // the fd closed meanwhile
    }
  }
  const ports = new Set<number>()
  for (const table of [`/proc/${pid}/net/tcp`, `/proc/${pid}/net/tcp6`]) {
    let text: string
    try {
      text = readFileSync(table, "utf8")
    } catch {
      continue
    }
    for (const row of text.split("\n").slice(1)) {
      const cols = row.trim().split(/\s+/)
      // sl local_address rem_address st ... inode (column 9); st 0A is LISTEN
      if (cols.length < 10 || cols[3] !== "0A" || !inodes.has(cols[9]!)) continue
      ports.add(parseInt(cols[1]!.split(":")[1]!, 16))
    }
  }
  return [...ports].sort((a, b) => a - b)
}

// ---- WebSockets -----------------------------------------------------------------------------

const openWebSocket = (pinboard: Pinboard, path: string): Promise<WebSocket> =>
  new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${pinboard.port}${path}`)
    ws.once("open", () => resolve(ws))
    ws.once("unexpected-response", (_req, res) => {
      reject(new Error(`unexpected response ${res.statusCode}`))
      ws.terminate()
    })
    ws.once("error", reject)
  })

const nextMessage = (ws: WebSocket): Promise<string> =>
  new Promise((resolve, reject) => {
    ws.once("message", (data) => resolve((data as Buffer).toString()))
    ws.once("close", (code) => reject(new Error(`closed (${code}) before a message`)))
  })

const closeWebSocket = (ws: WebSocket): Promise<void> =>
  new Promise((resolve) => {
    ws.once("close", () => resolve())
    ws.close()
  })

// ---- the fleet ------------------------------------------------------------------------------

interface Echo {
  readonly worker: string
  readonly url: string
  readonly headers: Record<string, string>
}

const AFFINITY = "x-affinity"

const echoOf = (answer: Answer): Echo => JSON.parse(answer.text) as Echo

const fleet = new Fleet()
/** Redis-backed, metrics on, access log on; workers a and b both on /threads. */
let observed: Pinboard
let metricsPort: number
let a: Worker
let b: Worker
/** Embedded registry, everything observability left at its defaults (no metrics, no access log, info). */
let plain: Pinboard
/** Embedded registry, `log.level: "warning"`. */
let quiet: Pinboard

beforeAll(async () => {
  const startObserved = async () => {
    const redis = await fleet.redis()
    metricsPort = await freePort()
    // Affinity by a header, so that one client can place ids on either worker (by ip, all go to one).
    observed = await fleet.pinboard({
      redis,
      config: { metrics: { port: metricsPort }, log: { access: true }, affinity: { key: `header:${AFFINITY}` } }
    })
    ;[a, b] = await Promise.all([
      fleet.worker(observed, { id: uid("wa"), namespaces: ["/threads"] }),
      fleet.worker(observed, { id: uid("wb"), namespaces: ["/threads"] })
    ])
    await waitForColdStart(observed, "/threads")
  }
  const startPlain = async () => {
    plain = await fleet.pinboard()
    await fleet.worker(plain, { id: uid("wp"), namespaces: ["/threads"] })
    await waitForColdStart(plain, "/threads")
  }
  const startQuiet = async () => {
    quiet = await fleet.pinboard({ config: { log: { level: "warning" } } })
  }
  try {
    await Promise.all([startObserved(), startPlain(), startQuiet()])
  } catch (error) {
    await fleet.stop()
    throw error
  }
}, scaled(60_000))

afterAll(async () => {
  await fleet.stop()
})

// ---- 1. metrics after known traffic -----------------------------------------------------------

describe("metrics (Redis registry, two workers on /threads)", () => {
  it("20 GETs over 5 fresh ids: 20 2xx requests, 5 placements, 5 placed and 15 forwarded resolves, batched Redis calls", async () => {
    const before = await scrape(metricsPort)
    const ids = Array.from({ length: 5 }, () => uid("count"))
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => request(observed, `/threads/${ids[i % 5]}/echo`)))
    expect(answers.map((answer) => answer.status)).toEqual(Array(20).fill(200))

    await eventually(async () => {
      const after = await scrape(metricsPort)
      expect(grew(before, after, "pinboard_requests_total", { namespace: "/threads", class: "2xx" })).toBe(20)
      expect(grew(before, after, "pinboard_request_duration_seconds_count", { class: "2xx" })).toBe(20)
      expect(grew(before, after, "pinboard_placements_total", { namespace: "/threads", kind: "placed" })).toBe(5)
      expect(grew(before, after, "pinboard_resolve_duration_seconds_count", { outcome: "placed" })).toBe(5)
      expect(grew(before, after, "pinboard_resolve_duration_seconds_count", { outcome: "forwarded" })).toBe(15)
      const redisResolves = grew(before, after, "pinboard_redis_call_duration_seconds_count", { script: "resolve" })
      expect(redisResolves).toBeGreaterThanOrEqual(1)
      // At most one per resolve (20), one per new placement for the membership view's proposal (5),
      // and one per resolve that waited behind its id's placement in the same call and asked again (15).
      expect(redisResolves).toBeLessThanOrEqual(40)
      expect(grew(before, after, "pinboard_redis_errors_total", { script: "resolve" })).toBe(0)
      // Nothing else was answered in the meantime.
      for (const cls of ["1xx", "3xx", "4xx", "5xx"]) {
        expect(grew(before, after, "pinboard_requests_total", { namespace: "/threads", class: cls })).toBe(0)
      }
      expect(after.series("pinboard_errors_total").reduce((sum, s) => sum + s.value, 0)).toBe(
        before.series("pinboard_errors_total").reduce((sum, s) => sum + s.value, 0)
      )
    })
  })

  it("an in-band refusal re-placed on the other worker: pinboard_refusals_total +1, one re_placed placement, a 2xx", async () => {
    const before = await scrape(metricsPort)
    const id = uid("refused")
    const answer = await request(observed, `/threads/${id}/refuse?key=${uid("key")}&mode=once`)
    expect(answer.status).toBe(200)
    await eventually(async () => {
      const after = await scrape(metricsPort)
      expect(grew(before, after, "pinboard_refusals_total")).toBe(1)
      expect(grew(before, after, "pinboard_placements_total", { namespace: "/threads", kind: "re_placed" })).toBe(1)
      expect(grew(before, after, "pinboard_requests_total", { namespace: "/threads", class: "2xx" })).toBe(1)
    })
  })

  it("an unknown namespace: UnknownNamespace +1, a 4xx under namespace \"other\" (never its own label)", async () => {
    const namespace = `/${uid("nowhere")}`
    const before = await scrape(metricsPort)
    const answer = await request(observed, `${namespace}/${uid()}/x`)
    expect(answer.status).toBe(404)
    expect(answer.text).toBe('{"error":"unknown namespace"}')

    await eventually(async () => {
      const after = await scrape(metricsPort)
      expect(grew(before, after, "pinboard_errors_total", { error: "UnknownNamespace" })).toBe(1)
      expect(grew(before, after, "pinboard_requests_total", { namespace: "other", class: "4xx" })).toBe(1)
      expect(grew(before, after, "pinboard_requests_total", { namespace: "/threads", class: "4xx" })).toBe(0)
      expect(grew(before, after, "pinboard_resolve_duration_seconds_count", { outcome: "unknown_namespace" })).toBe(1)
      expect(after.samples.filter((s) => Object.values(s.labels).includes(namespace))).toEqual([])
    })
  })

  it("an empty id (/threads//x): 400 counted under IdEmpty, namespace \"other\"", async () => {
    const before = await scrape(metricsPort)
    const answer = await request(observed, "/threads//x")
    expect(answer.status).toBe(400)
    expect(answer.text).toBe("id must be non-empty")

    await eventually(async () => {
      const after = await scrape(metricsPort)
      expect(grew(before, after, "pinboard_errors_total", { error: "IdEmpty" })).toBe(1)
      expect(grew(before, after, "pinboard_requests_total", { namespace: "other", class: "4xx" })).toBe(1)
      expect(grew(before, after, "pinboard_requests_total", { namespace: "/threads", class: "4xx" })).toBe(0)
      // Rejected before resolution.
      const resolves = (s: Scrape) => s.series("pinboard_resolve_duration_seconds_count").reduce((sum, x) => sum + x.value, 0)
      expect(resolves(after) - resolves(before)).toBe(0)
    })
  })

  it("a WebSocket: pinboard_open_tunnels 1 while open and 0 after close; the upgrade counted as 1xx", async () => {
    const before = await scrape(metricsPort)
    expect(before.get("pinboard_open_tunnels")).toBe(0)
    const ws = await openWebSocket(observed, `/threads/${uid("ws")}/ws`)
    try {
      ws.send("hello")
      expect(await nextMessage(ws)).toBe("hello")
      await eventually(async () => {
        const open = await scrape(metricsPort)
        expect(open.get("pinboard_open_tunnels")).toBe(1)
        expect(grew(before, open, "pinboard_requests_total", { namespace: "/threads", class: "1xx" })).toBe(1)
        expect(grew(before, open, "pinboard_request_duration_seconds_count", { class: "1xx" })).toBe(1)
        expect(grew(before, open, "pinboard_resolve_duration_seconds_count", { outcome: "placed" })).toBe(1)
      })
    } finally {
      await closeWebSocket(ws)
    }
    await eventually(async () => {
      const after = await scrape(metricsPort)
      expect(after.get("pinboard_open_tunnels")).toBe(0)
      expect(grew(before, after, "pinboard_requests_total", { namespace: "/threads", class: "1xx" })).toBe(1)
    })
  })

  it("pinboard_worker_inflight: per worker, the forwards awaiting headers; none once answered", async () => {
    // A fresh id on each worker (placement picks the worker; keep placing until both have one).
    const idOn = new Map<string, string>()
    for (let i = 0; i < 40 && idOn.size < 2; i++) {
      const id = uid("held")
      const answer = await request(observed, `/threads/${id}/echo`, { headers: { [AFFINITY]: uid("client") } })
      expect(answer.status).toBe(200)
      const { worker } = echoOf(answer)
      if (!idOn.has(worker)) idOn.set(worker, id)
    }
    expect([...idOn.keys()].sort()).toEqual([a.id, b.id].sort())

    const HOLD_MS = 1500
    const held = [
      request(observed, `/threads/${idOn.get(a.id)}/slow-headers?ms=${HOLD_MS}`),
      request(observed, `/threads/${idOn.get(a.id)}/slow-headers?ms=${HOLD_MS}`),
      request(observed, `/threads/${idOn.get(b.id)}/slow-headers?ms=${HOLD_MS}`)
    ]
    await eventually(async () => {
      const holding = await scrape(metricsPort)
      expect(holding.get("pinboard_worker_inflight", { worker: a.id })).toBe(2)
      expect(holding.get("pinboard_worker_inflight", { worker: b.id })).toBe(1)
      expect(holding.series("pinboard_worker_inflight").reduce((sum, s) => sum + s.value, 0)).toBe(3)
    }, HOLD_MS - 200)
    expect((await Promise.all(held)).map((answer) => answer.status)).toEqual([200, 200, 200])

    await eventually(async () => {
      const after = await scrape(metricsPort)
      expect(after.get("pinboard_worker_inflight", { worker: a.id }) ?? 0).toBe(0)
      expect(after.get("pinboard_worker_inflight", { worker: b.id }) ?? 0).toBe(0)
    })
  })
})

// ---- 2. the listener ------------------------------------------------------------------------

describe("the metrics listener", () => {
  it("serves GET and HEAD /metrics in the text format 0.0.4; other paths 404, other methods 405", async () => {
    const get = await toMetrics(metricsPort, "/metrics")
    expect(get.status).toBe(200)
    expect(get.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4(;|$)/)
    expect(get.text).toContain("# TYPE pinboard_requests_total counter")
    expect(get.text).toContain("# TYPE pinboard_open_tunnels gauge")
    expect(() => Scrape.parse(get.text)).not.toThrow()

    const withQuery = await toMetrics(metricsPort, "/metrics?name[]=x")
    expect(withQuery.status).toBe(200)

    const head = await toMetrics(metricsPort, "/metrics", { method: "HEAD" })
    expect(head.status).toBe(200)
    expect(head.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4(;|$)/)
    expect(head.text).toBe("")

    for (const path of ["/", "/metrics/", "/metricsx", "/healthz", "/threads/x/echo"]) {
      const answer = await toMetrics(metricsPort, path)
      expect({ path, status: answer.status }).toEqual({ path, status: 404 })
      expect(answer.text).not.toContain("pinboard_")
    }
    for (const method of ["POST", "PUT", "DELETE"]) {
      const answer = await toMetrics(metricsPort, "/metrics", { method, body: "x" })
      expect({ method, status: answer.status }).toEqual({ method, status: 405 })
      expect(answer.headers["allow"]).toBe("GET, HEAD")
    }
  })

  it("the data-plane port's /metrics is an instance request: 404 unknown namespace (JSON), counted as one", async () => {
    const before = await scrape(metricsPort)
    const answer = await request(observed, "/metrics")
    expect(answer.status).toBe(404)
    expect(answer.headers["content-type"]).toBe("application/json")
    expect(answer.text).toBe('{"error":"unknown namespace"}')

    await eventually(async () => {
      const after = await scrape(metricsPort)
      expect(grew(before, after, "pinboard_errors_total", { error: "UnknownNamespace" })).toBe(1)
      expect(grew(before, after, "pinboard_requests_total", { namespace: "other", class: "4xx" })).toBe(1)
    })
    const line = (await accessFor(observed, "/metrics"))[0]!
    expect(line).toMatchObject({ method: "GET", status: 404, error: "UnknownNamespace" })
  })

  it("with no metrics.port nothing else listens, and Pinboard still proxies", async () => {
    expect(listeningPorts(observed.pid)).toEqual([observed.port, metricsPort].sort((x, y) => x - y))
    expect(listeningPorts(plain.pid)).toEqual([plain.port])
    expect(logLines(plain).filter((line) => line.message.startsWith("pinboard metrics on"))).toEqual([])

    const answer = await request(plain, `/threads/${uid()}/echo`)
    expect(answer.status).toBe(200)
    expect(listeningPorts(plain.pid)).toEqual([plain.port])
  })
})

// ---- 3. logs --------------------------------------------------------------------------------

describe("logs", () => {
  it("every line is a JSON object with time (ISO), level and message, those three first", () => {
    for (const pinboard of [observed, plain, quiet]) {
      const lines = logLines(pinboard)
      expect(lines.length).toBeGreaterThan(0)
      for (const line of lines) expect(Object.keys(line).slice(0, 3)).toEqual(["time", "level", "message"])
    }
    const observedLines = logLines(observed)
    expect(observedLines.filter((line) => line.level === "info" && line.message === `pinboard listening on http://127.0.0.1:${observed.port}`)).toHaveLength(1)
    expect(
      observedLines.filter((line) => line.level === "info" && line.message === `pinboard metrics on http://127.0.0.1:${metricsPort}/metrics`)
    ).toHaveLength(1)
    // Redis is configured: no embedded-registry warning.
    expect(observedLines.filter((line) => line.message === EMBEDDED_WARNING)).toEqual([])
  })

  it("access log on: one line per instance request, the path without its query, worker and epoch when forwarded", async () => {
    const id = uid("logged")
    const get = await request(observed, `/threads/${id}/echo?secret=1`)
    expect(get.status).toBe(200)
    const seen = echoOf(get)
    expect(seen.url).toBe(`/threads/${id}/echo?secret=1`)
    const epoch = seen.headers["pinboard-epoch"]
    expect(epoch).toMatch(/^(0|[1-9][0-9]*)$/)

    const forwarded = (await accessFor(observed, `/threads/${id}/echo`))[0]!
    expect(forwarded).toEqual({
      time: expect.any(String),
      level: "info",
      message: "access",
      method: "GET",
      path: `/threads/${id}/echo`,
      client: "127.0.0.1",
      namespace: "/threads",
      id,
      status: 200,
      duration_ms: expect.any(Number),
      worker: seen.worker,
      epoch
    })
    expect(forwarded.duration_ms as number).toBeGreaterThanOrEqual(0)

    // A worker's own non-2xx answer is the worker's: no error tag.
    const post = await request(observed, `/threads/${id}/status/418?secret=1`, { method: "POST", body: "hello" })
    expect(post.status).toBe(418)
    expect((await accessFor(observed, `/threads/${id}/status/418`))[0]).toMatchObject({
      method: "POST",
      namespace: "/threads",
      id,
      status: 418,
      worker: seen.worker,
      epoch
    })
    expect((await accessFor(observed, `/threads/${id}/status/418`))[0]).not.toHaveProperty("error")

    // Pinboard's own answers: the catalogue tag, no worker, no epoch.
    const namespace = `/${uid("nowhere")}`
    expect((await request(observed, `${namespace}/${id}/x?secret=1`)).status).toBe(404)
    const unknown = (await accessFor(observed, `${namespace}/${id}/x`))[0]!
    expect(unknown).toMatchObject({ method: "GET", namespace, id, status: 404, error: "UnknownNamespace" })
    expect(unknown).not.toHaveProperty("worker")
    expect(unknown).not.toHaveProperty("epoch")

    const emptyPath = `/threads//${uid("rest")}`
    expect((await request(observed, `${emptyPath}?secret=1`)).status).toBe(400)
    const empty = (await accessFor(observed, emptyPath))[0]!
    expect(empty).toMatchObject({ method: "GET", path: emptyPath, status: 400, error: "IdEmpty" })
    expect(empty).not.toHaveProperty("worker")
    expect(empty).not.toHaveProperty("epoch")

    // A WebSocket: its 101, with the worker and the epoch the worker saw.
    const wsId = uid("wslog")
    const ws = await openWebSocket(observed, `/threads/${wsId}/ws?secret=1`)
    let wsSeen: { worker: string; headers: Record<string, string> }
    try {
      ws.send("__info__")
      wsSeen = JSON.parse(await nextMessage(ws)) as typeof wsSeen
    } finally {
      await closeWebSocket(ws)
    }
    expect((await accessFor(observed, `/threads/${wsId}/ws`))[0]).toMatchObject({
      method: "GET",
      namespace: "/threads",
      id: wsId,
      status: 101,
      worker: wsSeen.worker,
      epoch: wsSeen.headers["pinboard-epoch"]
    })

    // Query strings never reach the log; probes and the registry API are not instance requests.
    expect(observed.process.lines.filter((line) => line.includes("secret"))).toEqual([])
    const notInstance = accessLines(observed).filter((line) => /^\/(registry|healthz|readyz)(\/|$)/.test(String(line.path)))
    expect(notInstance).toEqual([])
  })

  it("access log on: a client that leaves while its worker holds the headers is 499, naming that worker and epoch", async () => {
    const id = uid("left")
    const placed = await request(observed, `/threads/${id}/echo`)
    expect(placed.status).toBe(200)
    const { worker, headers } = echoOf(placed)
    const hold = uid("hold")
    const path = `/threads/${id}/hold`
    const client = await rawConnection(observed.port)
    client.write(rawRequestHead("GET", `${path}?name=${hold}&silent=1`, [["Host", "client.example"]]))
    await eventually(async () => expect((await scrape(metricsPort)).get("pinboard_worker_inflight", { worker })).toBe(1))
    client.close()

    const left = (await accessFor(observed, path))[0]!
    expect(left).toMatchObject({ method: "GET", namespace: "/threads", id, status: 499, worker, epoch: headers["pinboard-epoch"] })
    expect((await request(observed, `/threads/${id}/release?name=${hold}`)).status).toBeLessThan(500)
  })

  it("access log off (the default): no access lines after traffic", async () => {
    const id = uid("unlogged")
    expect((await request(plain, `/threads/${id}/echo`)).status).toBe(200)
    expect((await request(plain, "/nowhere/x")).status).toBe(404)
    expect((await request(plain, "/threads//x")).status).toBe(400)
    // The lines of an exchange are written as it closes: a later request's answer means they are due.
    expect((await request(plain, "/healthz")).status).toBe(200)
    const lines = logLines(plain)
    expect(lines.filter((line) => line.message === "access")).toEqual([])
    expect(plain.process.lines.filter((line) => line.includes(id))).toEqual([])
    // The default level is info, and the embedded registry warns.
    expect(lines.filter((line) => line.level === "info" && line.message === `pinboard listening on http://127.0.0.1:${plain.port}`)).toHaveLength(1)
    expect(lines.filter((line) => line.level === "warning" && line.message === EMBEDDED_WARNING)).toHaveLength(1)
  })

  it("log.level warning: no info lines (not even \"pinboard listening\"), the embedded-registry warning still written", async () => {
    await quiet.process.waitForLine(/no Redis configured/, 5000)
    expect((await request(quiet, "/healthz")).status).toBe(200)
    expect((await request(quiet, "/threads/x/echo")).status).toBe(404)
    const lines = logLines(quiet)
    expect(lines.filter((line) => line.level === "info" || line.level === "debug")).toEqual([])
    expect(lines.filter((line) => line.message.startsWith("pinboard listening"))).toEqual([])
    expect(lines.filter((line) => line.level === "warning" && line.message === EMBEDDED_WARNING)).toHaveLength(1)
  })
})
