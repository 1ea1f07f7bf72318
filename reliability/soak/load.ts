// The soak's steady load through Pinboard: a fixed number of HTTP clients (closed loop, paced to
// a shared request rate), each on its own connection that it replaces every few hundred
// requests, and a few WebSocket clients opening, echoing and closing sockets. Ids come from a
// small hot set (kept placed) and a rotating population that slides forward all the time, so
// placements are made, evicted idle and swept throughout. Answers are counted by status.
import { Client } from "undici"
import WebSocket from "ws"

export interface LoadOptions {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string
  readonly clients: number
  /** Cap on requests per second over all clients. */
  readonly rps: number
  /** Ids `h0..h<hot-1>`, asked often enough to stay placed. */
  readonly hotIds: number
  /** Share of requests going to the hot ids. */
  readonly hotShare: number
  /** Size of the rotating population `c<base>..c<base+population-1>`. */
  readonly population: number
  /** How many ids per second the population's base slides forward. */
  readonly rotatePerS: number
  readonly wsClients: number
  /** The main namespace and the one relays call into. */
  readonly namespace: string
  readonly relayNamespace: string
}

/** Counts by status and by client-side error, over some span. */
export class Tally {
  readonly statuses = new Map<number, number>()
  readonly errors = new Map<string, number>()
  requests = 0

  status(code: number): void {
    this.requests++
    this.statuses.set(code, (this.statuses.get(code) ?? 0) + 1)
  }

  error(what: string): void {
    this.requests++
    this.errors.set(what, (this.errors.get(what) ?? 0) + 1)
  }

  count(code: number): number {
    return this.statuses.get(code) ?? 0
  }

  get ok(): number {
    let n = 0
    for (const [code, count] of this.statuses) if (code >= 200 && code < 300) n += count
    return n
  }

  get errorCount(): number {
    let n = 0
    for (const count of this.errors.values()) n += count
    return n
  }

  /** `2xx 3950 502 2 503 28 err 0` */
  brief(): string {
    const parts = [`2xx ${this.ok}`]
    for (const code of [...this.statuses.keys()].sort((a, b) => a - b)) if (code < 200 || code >= 300) parts.push(`${code} ${this.count(code)}`)
    parts.push(`err ${this.errorCount}`)
    return parts.join(" ")
  }
}

export class WsTally {
  opened = 0
  echoes = 0
  /** Upgrades answered with another status than 101, by status. */
  readonly refused = new Map<number, number>()
  /** Sockets closed by something else than our own close (code 1000), by close code. */
  readonly cut = new Map<number, number>()
  /** Handshakes failing without a status (reset, timeout), by message. */
  readonly errors = new Map<string, number>()

  brief(): string {
    const map = (m: Map<number | string, number>) => [...m].map(([k, v]) => `${k}:${v}`).join(",") || "-"
    return `open ${this.opened} echo ${this.echoes} refused ${map(this.refused)} cut ${map(this.cut)} err ${map(this.errors)}`
  }
}

const randInt = (n: number) => Math.floor(Math.random() * n)
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
const BODY = Buffer.alloc(512, "soak body ")

export class Load {
  /** Everything since the start. */
  readonly total = new Tally()
  /** Since the last `takeInterval`. */
  private interval = new Tally()
  readonly ws = new WsTally()
  private wsInterval = new WsTally()
  private running = false
  private readonly loops: Array<Promise<void>> = []
  private readonly clients = new Set<Client>()
  private readonly sockets = new Set<WebSocket>()
  private startedAt = 0
  private nextSlot = 0
  private highestCold = -1

  constructor(private readonly options: LoadOptions) {}

  start(): void {
    this.running = true
    this.startedAt = performance.now()
    this.nextSlot = this.startedAt
    for (let i = 0; i < this.options.clients; i++) this.loops.push(this.httpLoop())
    for (let i = 0; i < this.options.wsClients; i++) this.loops.push(this.wsLoop())
  }

  /** Stops the loops; requests in flight get `graceMs` to finish, then their connections are cut. */
  async stop(graceMs: number): Promise<void> {
    this.running = false
    const timeout = sleep(graceMs).then(() => "timeout" as const)
    if ((await Promise.race([Promise.all(this.loops), timeout])) === "timeout") {
      for (const client of this.clients) void client.destroy().catch(() => undefined)
      for (const socket of this.sockets) socket.terminate()
      await Promise.race([Promise.all(this.loops), sleep(2000)])
    }
  }

  takeInterval(): { http: Tally; ws: WsTally } {
    const taken = { http: this.interval, ws: this.wsInterval }
    this.interval = new Tally()
    this.wsInterval = new WsTally()
    return taken
  }

  /** Distinct ids of the rotating population asked for so far. */
  get coldIdsTouched(): number {
    return Math.min(this.highestCold + 1, this.options.population + Math.floor(this.elapsedS() * this.options.rotatePerS))
  }

  private elapsedS(): number {
    return (performance.now() - this.startedAt) / 1000
  }

  private pickId(): string {
    if (Math.random() < this.options.hotShare) return `h${randInt(this.options.hotIds)}`
    const index = Math.floor(this.elapsedS() * this.options.rotatePerS) + randInt(this.options.population)
    if (index > this.highestCold) this.highestCold = index
    return `c${index}`
  }

  /** Waits for this client's turn under the shared rate cap (no catching up after a stall). */
  private async pace(): Promise<void> {
    const now = performance.now()
    const at = Math.max(now, this.nextSlot)
    this.nextSlot = at + 1000 / this.options.rps
    if (at > now) await sleep(at - now)
  }

  private request(): { method: "GET" | "POST"; path: string; id: string; body?: Buffer } {
    const id = this.pickId()
    const { namespace, relayNamespace } = this.options
    const roll = Math.random()
    if (roll < 0.6) return { method: "GET", path: `${namespace}/${id}/state`, id }
    if (roll < 0.9) return { method: "POST", path: `${namespace}/${id}/echo`, id, body: BODY.subarray(0, 16 + randInt(BODY.length - 16)) }
    if (roll < 0.95) return { method: "POST", path: `${namespace}/${id}/relay?ns=${encodeURIComponent(relayNamespace)}`, id, body: BODY.subarray(0, 16) }
    return { method: "GET", path: `${relayNamespace}/${id}/state?q=${randInt(1000)}`, id }
  }

  private async httpLoop(): Promise<void> {
    let client: Client | undefined
    let left = 0
    const drop = async () => {
      if (client === undefined) return
      const old = client
      client = undefined
      this.clients.delete(old)
      await old.close().catch(() => old.destroy().catch(() => undefined))
    }
    while (this.running) {
      await this.pace()
      if (!this.running) break
      if (client === undefined || left <= 0) {
        await drop()
        client = new Client(this.options.origin, { pipelining: 1, headersTimeout: 40_000, bodyTimeout: 40_000, connectTimeout: 5_000 })
        this.clients.add(client)
        left = 100 + randInt(900)
      }
      left--
      const { method, path, id, body } = this.request()
      try {
        const answer = await client.request({
          method,
          path,
          headers: { "x-affinity": id, ...(body === undefined ? {} : { "content-type": "application/octet-stream" }) },
          ...(body === undefined ? {} : { body })
        })
        await answer.body.dump({ limit: 1 << 20 })
        this.total.status(answer.statusCode)
        this.interval.status(answer.statusCode)
      } catch (error) {
        const what = (error as { code?: string }).code ?? (error instanceof Error ? error.message : String(error))
        this.total.error(what)
        this.interval.error(what)
        const old = client
        client = undefined
        this.clients.delete(old)
        await old.destroy().catch(() => undefined)
      }
    }
    await drop()
  }

  private async wsLoop(): Promise<void> {
    while (this.running) {
      await this.wsSession(2000 + randInt(8000))
      if (this.running) await sleep(200 + randInt(800))
    }
  }

  /** One socket: open, send a message every 250 ms for `lifetimeMs`, close; what happened is counted. */
  private wsSession(lifetimeMs: number): Promise<void> {
    const id = this.pickId()
    const url = `${this.options.origin.replace(/^http/, "ws")}${this.options.namespace}/${id}/ws`
    const tallies = [this.ws, this.wsInterval]
    return new Promise<void>((resolve) => {
      const socket = new WebSocket(url, { headers: { "x-affinity": id }, handshakeTimeout: 10_000 })
      this.sockets.add(socket)
      let opened = false
      let closingOurselves = false
      let ticker: NodeJS.Timeout | undefined
      let lifetime: NodeJS.Timeout | undefined
      socket.on("open", () => {
        opened = true
        for (const t of tallies) t.opened++
        let k = 0
        ticker = setInterval(() => socket.send(`soak ${id} ${k++}`), 250)
        lifetime = setTimeout(() => {
          closingOurselves = true
          socket.close(1000)
        }, lifetimeMs)
      })
      socket.on("message", () => {
        for (const t of tallies) t.echoes++
      })
      socket.on("error", (error) => {
        if (opened || !this.running) return
        const status = /Unexpected server response: (\d+)/.exec(error.message)?.[1]
        for (const t of tallies) {
          if (status !== undefined) t.refused.set(Number(status), (t.refused.get(Number(status)) ?? 0) + 1)
          else t.errors.set(error.message, (t.errors.get(error.message) ?? 0) + 1)
        }
      })
      socket.on("close", (code) => {
        clearInterval(ticker)
        clearTimeout(lifetime)
        this.sockets.delete(socket)
        if (opened && !(closingOurselves && code === 1000)) for (const t of tallies) t.cut.set(code, (t.cut.get(code) ?? 0) + 1)
        resolve()
      })
      // A stop while the socket is open: close it now rather than waiting out its lifetime.
      const watch = setInterval(() => {
        if (this.running) return
        clearInterval(watch)
        if (socket.readyState === WebSocket.OPEN) {
          closingOurselves = true
          socket.close(1000)
        } else if (socket.readyState === WebSocket.CONNECTING) socket.terminate()
      }, 200)
      socket.once("close", () => clearInterval(watch))
    })
  }
}
