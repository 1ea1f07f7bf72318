// A Node load generator, one process per measurement, pinned by the caller: WebSocket
// clients with one echo message in flight each (bench/proxy.ts's WebSocket scenario; its HTTP
// scenarios use wrk, bench/wrk.ts), or autocannon for HTTP GETs (bench/profile.ts,
// bench/tracing.ts). A warm-up first, then the window; prints `window start` and
// `window end` as they happen (so the caller can read the servers' CPU time around the
// window), then one JSON line. With several origins the connections are split evenly over
// them, still in this one process (one autocannon instance per origin, run at once; one set
// of latencies).
//
//   node dist-bench/bench/load.js '{"kind":"http","origins":["http://127.0.0.1:8080"],"paths":["/bench/b0/small"],"connections":32,"warmupS":1,"seconds":5}'
import autocannon from "autocannon"
import WebSocket from "ws"

export interface LoadSpec {
  readonly kind: "http" | "ws"
  /** `http://host:port` each, the connections split evenly over them; the WebSocket clients use the same with `ws:`. */
  readonly origins: ReadonlyArray<string>
  /** Spread over the connections (autocannon cycles through them on each). */
  readonly paths: ReadonlyArray<string>
  readonly connections: number
  readonly warmupS: number
  readonly seconds: number
}

export interface LoadResult {
  /** Completed 2xx responses (or echoed messages) in the window. */
  readonly completed: number
  readonly seconds: number
  readonly perSecond: number
  readonly p50: number
  readonly p99: number
  /** The slowest, ms. */
  readonly max: number
  readonly non2xx: number
  readonly errors: number
  readonly timeouts: number
  /** Status codes other than 2xx and their counts. */
  readonly statuses: Record<string, number>
  /** Response bytes (headers included) per completed response, or echo bytes per message. */
  readonly bytesEach: number
}

const MESSAGE = Buffer.alloc(64, "echo")
const TIMEOUT_S = 10

/** Latencies in ms, kept unrounded (autocannon's own histogram rounds to whole ms). */
class Latencies {
  private values = new Float64Array(1 << 16)
  private length = 0
  add(ms: number): void {
    if (this.length === this.values.length) {
      const grown = new Float64Array(this.values.length * 2)
      grown.set(this.values)
      this.values = grown
    }
    this.values[this.length++] = ms
  }
  quantiles(): { p50: number; p99: number; max: number } {
    const sorted = this.values.subarray(0, this.length).sort()
    const at = (q: number) => (this.length === 0 ? NaN : sorted[Math.min(this.length - 1, Math.floor(q * this.length))]!)
    return { p50: at(0.5), p99: at(0.99), max: this.length === 0 ? NaN : sorted[this.length - 1]! }
  }
}

const cannon = (origin: string, connections: number, spec: LoadSpec, seconds: number, latencies: Latencies | undefined): Promise<autocannon.Result> =>
  new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: origin,
        requests: spec.paths.map((path) => ({ method: "GET", path })),
        connections,
        pipelining: 1,
        duration: seconds,
        timeout: TIMEOUT_S
      },
      (error, result) => (error ? reject(error) : resolve(result))
    )
    if (latencies !== undefined) {
      instance.on("response", (_client, statusCode, _bytes, ms) => {
        if (statusCode >= 200 && statusCode < 300) latencies.add(ms)
      })
    }
  })

/** The connections of each origin: an even split, the first origins taking one more of the remainder. */
const shares = (spec: LoadSpec): Array<{ origin: string; connections: number }> =>
  spec.origins.map((origin, i) => ({
    origin,
    connections: Math.floor(spec.connections / spec.origins.length) + (i < spec.connections % spec.origins.length ? 1 : 0)
  }))

/** One autocannon instance per origin, all at once. */
const cannons = (spec: LoadSpec, seconds: number, latencies: Latencies | undefined): Promise<Array<autocannon.Result>> =>
  Promise.all(shares(spec).map((share) => cannon(share.origin, share.connections, spec, seconds, latencies)))

const http = async (spec: LoadSpec): Promise<LoadResult> => {
  await cannons(spec, spec.warmupS, undefined)
  const latencies = new Latencies()
  console.log("window start")
  const results = await cannons(spec, spec.seconds, latencies)
  console.log("window end")
  const sum = (of: (result: autocannon.Result) => number) => results.reduce((n, result) => n + of(result), 0)
  const statuses: Record<string, number> = {}
  for (const result of results) {
    for (const [code, { count }] of Object.entries(result.statusCodeStats as Record<string, { count: number }>)) {
      if (!code.startsWith("2")) statuses[code] = (statuses[code] ?? 0) + count
    }
  }
  const completed = sum((result) => result["2xx"])
  const seconds = Math.max(...results.map((result) => result.duration))
  return {
    completed,
    seconds,
    perSecond: completed / seconds,
    ...latencies.quantiles(),
    non2xx: sum((result) => result.non2xx),
    errors: sum((result) => result.errors),
    timeouts: sum((result) => result.timeouts),
    statuses,
    bytesEach: sum((result) => result.throughput.total) / Math.max(completed, 1)
  }
}

/** Each client sends a message, waits for its echo, sends the next; counted only in the window. */
const webSocket = async (spec: LoadSpec): Promise<LoadResult> => {
  const bases = spec.origins.map((origin) => origin.replace(/^http/, "ws"))
  const latencies = new Latencies()
  let counting = false
  let stopping = false
  let completed = 0
  let errors = 0
  let mismatches = 0
  const clients = await Promise.all(
    Array.from({ length: spec.connections }, (_, i) =>
      new Promise<WebSocket>((resolve, reject) => {
        const client = new WebSocket(`${bases[i % bases.length]}${spec.paths[i % spec.paths.length]}`, { perMessageDeflate: false })
        client.once("open", () => resolve(client))
        client.once("error", reject)
      })
    )
  )
  for (const client of clients) {
    let sentAt = 0
    const send = () => {
      sentAt = performance.now()
      client.send(MESSAGE)
    }
    client.on("message", (data: Buffer) => {
      if (data.length !== MESSAGE.length) mismatches++
      if (counting) {
        latencies.add(performance.now() - sentAt)
        completed++
      }
      if (!stopping) send()
    })
    client.on("error", () => errors++)
    client.on("close", () => {
      if (!stopping) errors++
    })
    send()
  }
  const sleep = (s: number) => new Promise((resolve) => setTimeout(resolve, s * 1000))
  await sleep(spec.warmupS)
  console.log("window start")
  counting = true
  const started = performance.now()
  await sleep(spec.seconds)
  counting = false
  const seconds = (performance.now() - started) / 1000
  console.log("window end")
  stopping = true
  for (const client of clients) client.terminate()
  return {
    completed,
    seconds,
    perSecond: completed / seconds,
    ...latencies.quantiles(),
    non2xx: mismatches,
    errors,
    timeouts: 0,
    statuses: mismatches > 0 ? { "echo differs": mismatches } : {},
    bytesEach: MESSAGE.length
  }
}

const spec = JSON.parse(process.argv[2] ?? "null") as LoadSpec | null
if (spec === null) throw new Error("usage: load.js '<json LoadSpec>'")
const result = await (spec.kind === "http" ? http(spec) : webSocket(spec))
console.log(JSON.stringify(result))
process.exit(0)
