// Pinboard behind a real nginx (docs/deploy.md "Behind a load balancer"): Debian's nginx with
// the documented configuration in front of two built Pinboard replicas on one redis-server,
// fixture workers registering through nginx's workers' listener, clients on their own loopback
// addresses (127.0.0.N). The replicas run the documented settings: nginx trusted
// (PINBOARD_TRUSTED_PROXIES=127.0.0.1), a drain delay, the registry API on its own port, the
// default keep-alive. A control replica behind its own nginx runs Pinboard as it was before
// them: nobody trusted and Node's old 5 s keep-alive.
//
// - ip affinity ranks the client's address as nginx reports it, and the worker gets that
//   address as its one X-Forwarded-For; a client cannot claim another.
// - WebSockets, streamed responses and large bodies pass nginx.
// - nginx reuses an idle upstream connection after longer than 5 s: the connections nginx holds
//   to the replicas (read from /proc) are the same before and after.
// - A rolling restart under load, with a balancer that follows /readyz (the test, reloading
//   nginx), loses no request, and nginx never has to pass a request on to the other replica.
import { createHash, randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import http from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { eventually, Fleet, TOKEN, uid, waitForColdStart } from "../support/Fleet.js"
import { startNginx, type Nginx } from "../support/Nginx.js"
import { DOCUMENTED_SITE, nginxSite, type NginxReplica } from "../support/NginxSite.js"
import { killPid } from "../support/Processes.js"
import { readiness, replicaSpec, startReplica, type Replica } from "../support/Replica.js"
import { poll, quietWindow, scaled, within } from "../support/Time.js"
import { headerValues } from "../support/Wire.js"

const NS = "/threads"
const LEASE_MS = scaled(3000)
const DRAIN_DELAY_MS = scaled(2000)
/** How long the balancer takes to notice that a replica is not ready (nominal, scaled): well inside the drain delay. */
const NOTICE_MS = 500

// ---- a client on its own loopback address --------------------------------------------------------

interface Answer {
  readonly status: number
  readonly text: string
}

interface SendOptions {
  /** The client's own address: 127.0.0.N (every one of them is this machine's). */
  readonly from: string
  readonly method?: string
  readonly headers?: Record<string, string>
  readonly body?: Buffer
}

/** One request on its own connection, from `from`. */
const send = (port: number, path: string, options: SendOptions): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const req = http.request({
      host: "127.0.0.1",
      port,
      path,
      method: options.method ?? "GET",
      localAddress: options.from,
      agent: false,
      headers: { ...options.headers, ...(options.body === undefined ? {} : { "content-length": String(options.body.length) }) }
    })
    req.setTimeout(scaled(10_000), () => req.destroy(new Error(`no answer to ${path} in time`)))
    req.on("error", reject)
    req.on("response", (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("error", reject)
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }))
    })
    req.end(options.body)
  })

interface Echo {
  readonly worker: string
  readonly rawHeaders: Array<string>
  readonly bodyBytes: number
}

/** A new id through nginx from `from`: the worker's echo. */
const echoVia = async (port: number, from: string, headers: Record<string, string> = {}): Promise<Echo & { readonly id: string }> => {
  const id = uid("lb")
  const answer = await send(port, `${NS}/${id}/echo`, { from, headers })
  if (answer.status !== 200) throw new Error(`${id} from ${from}: ${answer.status} ${answer.text}`)
  return { id, ...(JSON.parse(answer.text) as Echo) }
}

// ---- the deployment --------------------------------------------------------------------------------

let fleet: Fleet
let nginx: Nginx
let controlNginx: Nginx
const replicas: Record<"a" | "b", Replica | undefined> = { a: undefined, b: undefined }
let control: Replica
let workerIds: Array<string>
const everyReplica: Array<Replica> = []

const started = async (replica: Promise<Replica>) => {
  const running = await replica
  everyReplica.push(running)
  return running
}

const upstreams = (list: ReadonlyArray<Replica>, down?: Replica): Array<NginxReplica> =>
  list.map((replica) => ({ data: `127.0.0.1:${replica.port}`, registry: `127.0.0.1:${replica.spec.registryPort}`, down: replica === down }))

const pair = (): Array<Replica> => [replicas.a!, replicas.b!]

/** docs/protocol.md "Resolution": the worker with the greatest sha1hex(affinity + "\n" + worker). */
const preferred = (affinity: string): string => {
  const score = (worker: string) => createHash("sha1").update(`${affinity}\n${worker}`).digest("hex")
  return [...workerIds].sort().reduce((best, worker) => (score(worker) > score(best) ? worker : best))
}

/** The access line of `id`'s request among the replicas' output. */
const accessLineOf = (id: string, among: ReadonlyArray<Replica>): Record<string, unknown> => {
  for (const replica of among) {
    const line = replica.process.lines.find((text) => text.includes('"message":"access"') && text.includes(`/${id}/`))
    if (line !== undefined) return JSON.parse(line) as Record<string, unknown>
  }
  throw new Error(`no access line for ${id}`)
}

beforeAll(async () => {
  fleet = new Fleet()
  const redis = await fleet.redis()
  const shared = { redisUrl: redis.url, prefix: uid("pb"), leaseMs: LEASE_MS }
  const documented = { PINBOARD_TRUSTED_PROXIES: "127.0.0.1", PINBOARD_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS), PINBOARD_ACCESS_LOG: "1" }
  // Started side by side: three processes one after another take most of the hook's time on a loaded machine.
  ;[replicas.a, replicas.b, control] = await Promise.all([
    started(replicaSpec({ ...shared, env: documented }).then(startReplica)),
    started(replicaSpec({ ...shared, env: documented }).then(startReplica)),
    started(replicaSpec({ ...shared, env: { PINBOARD_KEEPALIVE_TIMEOUT_MS: "5000", PINBOARD_ACCESS_LOG: "1" } }).then(startReplica))
  ])
  ;[nginx, controlNginx] = await Promise.all([startNginx(upstreams(pair())), startNginx(upstreams([control]))])
  // The workers reach the registry API through nginx's workers' listener, whichever replica is up.
  const throughNginx = { ...replicas.a, url: nginx.registryUrl, registryUrl: nginx.registryUrl }
  const workers = await Promise.all(["w1", "w2"].map((name) => fleet.worker(throughNginx, { id: uid(`lb-${name}`), namespaces: [NS] })))
  workerIds = workers.map((worker) => worker.id)
  await waitForColdStart(replicas.a, NS)
}, scaled(90_000))

afterAll(async () => {
  await nginx?.stop()
  await controlNginx?.stop()
  for (const replica of everyReplica) await replica.stop()
  await fleet?.stop()
})

describe("Pinboard behind nginx", () => {
  it("runs the configuration docs/deploy.md gives", () => {
    const docs = readFileSync(new URL("../../docs/deploy.md", import.meta.url), "utf8")
    const block = /```nginx\n([\s\S]*?)```/.exec(docs)
    expect(block?.[1]).toBe(nginxSite(DOCUMENTED_SITE))
  })

  it("places new ids by the client address nginx reports, which the worker gets as its one X-Forwarded-For", async () => {
    // Enough client addresses that each worker is preferred by some.
    const clients: Array<string> = []
    for (let n = 2; n < 250 && (clients.length < 8 || new Set(clients.map(preferred)).size < 2); n++) clients.push(`127.0.0.${n}`)
    expect(new Set(clients.map(preferred)).size).toBe(2)
    for (const client of clients) {
      const echo = await echoVia(nginx.port, client)
      expect({ client, worker: echo.worker }).toEqual({ client, worker: preferred(client) })
      expect(headerValues(echo.rawHeaders, "x-forwarded-for")).toEqual([client])
      await eventually(() => expect(accessLineOf(echo.id, pair())).toMatchObject({ client, status: 200 }))
    }
  })

  it("takes no address a client claims, and the address a trusted hop in front of nginx reports", async () => {
    // From an untrusted client, what it wrote is left of the address nginx appended: ignored.
    const claimed = await echoVia(nginx.port, "127.0.0.3", { "x-forwarded-for": "203.0.113.7" })
    expect(headerValues(claimed.rawHeaders, "x-forwarded-for")).toEqual(["127.0.0.3"])
    expect(claimed.worker).toBe(preferred("127.0.0.3"))
    // From 127.0.0.1, trusted like nginx (a proxy in front of it), the address it reports is the client.
    for (const n of [1, 2, 3, 4, 5, 6]) {
      const client = `203.0.113.${n}`
      const echo = await echoVia(nginx.port, "127.0.0.1", { "x-forwarded-for": client })
      expect(headerValues(echo.rawHeaders, "x-forwarded-for")).toEqual([client])
      expect(echo.worker).toBe(preferred(client))
      await eventually(() => expect(accessLineOf(echo.id, pair())).toMatchObject({ client }))
    }
  })

  it("without trusted proxies (the control), every client behind nginx is nginx", async () => {
    for (const n of [2, 3, 4, 5, 6, 7, 8, 9]) {
      const echo = await echoVia(controlNginx.port, `127.0.0.${n}`)
      expect(headerValues(echo.rawHeaders, "x-forwarded-for")).toEqual(["127.0.0.1"])
      expect(echo.worker).toBe(preferred("127.0.0.1"))
    }
  })

  it("tunnels a WebSocket through nginx", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${nginx.port}${NS}/${uid("room")}/ws`, { localAddress: "127.0.0.4" })
    const next = () => new Promise<string>((resolve) => ws.once("message", (data) => resolve((data as Buffer).toString())))
    const opened = new Promise((resolve, reject) => {
      ws.once("open", resolve)
      ws.once("error", reject)
    })
    await within(opened, 5_000, "the WebSocket's upgrade")
    ws.send("hello through nginx")
    expect(await within(next(), 5_000, "the echo")).toBe("hello through nginx")
    ws.send("__info__")
    const info = JSON.parse(await within(next(), 5_000, "the upgrade seen")) as { worker: string; headers: Record<string, string> }
    expect(info.headers["x-forwarded-for"]).toBe("127.0.0.4")
    expect(info.headers.upgrade).toBe("websocket")
    expect(info.worker).toBe(preferred("127.0.0.4"))
    ws.close()
  })

  it("passes a streamed response as it comes (proxy_buffering off) and a body past nginx's default 1 MB", async () => {
    const everyMs = 400
    const arrivals: Array<{ readonly text: string; readonly at: number }> = []
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const path = `${NS}/${uid("sse")}/stream?chunks=4&everyMs=${everyMs}`
      const req = http.get({ host: "127.0.0.1", port: nginx.port, path, localAddress: "127.0.0.5", agent: false })
      req.on("error", reject)
      req.on("response", (res) => {
        res.on("data", (chunk: Buffer) => arrivals.push({ text: chunk.toString(), at: performance.now() }))
        res.on("end", () => resolve(res.statusCode))
      })
    })
    expect(status).toBe(200)
    expect(arrivals.map((arrival) => arrival.text).join("")).toBe("chunk 0\nchunk 1\nchunk 2\nchunk 3\n")
    // The worker wrote them 3 × 400 ms apart: buffered, they would arrive together at the end.
    expect(arrivals.at(-1)!.at - arrivals[0]!.at).toBeGreaterThanOrEqual(2 * everyMs)

    const body = randomBytes(2 * 1024 * 1024)
    const upload = await send(nginx.port, `${NS}/${uid("big")}/upload`, { from: "127.0.0.5", method: "POST", body })
    expect(upload.status).toBe(200)
    expect((JSON.parse(upload.text) as Echo).bodyBytes).toBe(body.length)
  })

  it("serves /registry/* on the workers' listener only", async () => {
    const auth = { authorization: `Bearer ${TOKEN}` }
    const outside = await send(nginx.port, "/registry/workers", { from: "127.0.0.6", headers: auth })
    expect({ status: outside.status, text: outside.text }).toEqual({ status: 404, text: '{"error":"not found"}' })
    const workers = await send(nginx.registryPort, "/registry/workers", { from: "127.0.0.1", headers: auth })
    expect(workers.status).toBe(200)
  })

  it("keeps an idle upstream connection past Node's old 5 s keep-alive, and nginx reuses it", async () => {
    const held = () => pair().map((replica) => nginx.connectionsTo(replica.port))
    const heldByControl = () => controlNginx.connectionsTo(control.port)
    // Each answers 200 (echoVia checks): two through nginx, one to each replica by round robin, one to the control.
    const requests = async () => {
      for (const from of ["127.0.0.7", "127.0.0.8"]) await echoVia(nginx.port, from)
      await echoVia(controlNginx.port, "127.0.0.7")
    }
    await requests()
    const before = held()
    const controlBefore = heldByControl()
    for (const toReplica of before) expect(toReplica.length).toBeGreaterThanOrEqual(1)
    expect(controlBefore.length).toBeGreaterThanOrEqual(1)

    // Idle past 5 s, below nginx's upstream keepalive_timeout (60 s) and Pinboard's 75 s.
    await quietWindow(7_000)
    expect(held()).toEqual(before)
    expect(heldByControl()).toEqual([])

    await requests()
    // Every request went over a connection opened before the wait: nginx opened none.
    expect(held()).toEqual(before)
    // The control's connection was closed at 5 s; nginx opened another, the request still served.
    expect(heldByControl().filter((port) => controlBefore.includes(port))).toEqual([])
    expect(heldByControl().length).toBeGreaterThanOrEqual(1)
    expect(nginx.errorLog().filter((line) => /\[(error|crit|alert|emerg)\]/.test(line))).toEqual([])
  })

  it("loses no request in a rolling restart under load, and nginx never passes one on", async () => {
    const ids = Array.from({ length: 8 }, () => uid("roll"))
    for (const id of ids) expect((await send(nginx.port, `${NS}/${id}/echo`, { from: "127.0.0.9" })).status).toBe(200)
    const accessFrom = nginx.accessLog().length
    const errorsFrom = nginx.errorLog().length
    const load = startLoad(ids)

    const servedInDelay: Record<string, number> = {}
    for (const name of ["a", "b"] as const) {
      const replica = replicas[name]!
      const signalledAt = Date.now()
      killPid(replica.pid, "SIGTERM")
      // A balancer that follows /readyz, as Kubernetes' does: it sees the replica not ready...
      await poll(async () => (await readiness(replica)) !== 200, { timeoutMs: 5_000, reason: `${name}'s /readyz to fail` })
      // ...a little later takes it out, while the replica still serves what nginx sends it...
      await quietWindow(NOTICE_MS)
      await nginx.reconfigure(upstreams(pair(), replica))
      const removedAt = Date.now()
      // ...and the replica, once its delay is over, drains and exits.
      expect(await within(replica.process.exited, DRAIN_DELAY_MS + 15_000, `${name}'s exit`)).toEqual({ code: 0, signal: null })
      servedInDelay[name] = nginx
        .accessLog()
        .filter((line) => line.upstream === `127.0.0.1:${replica.port}` && line.startedAt > signalledAt && line.startedAt < removedAt).length
      replicas[name] = await started(startReplica(replica.spec))
      await nginx.reconfigure(upstreams(pair()))
    }
    const outcomes = await load.stop()

    const lost = outcomes.filter((outcome) => outcome.status !== 200)
    // Soft: a failing run shows every way it failed.
    expect.soft({ lost: lost.length, first: lost.slice(0, 5) }).toEqual({ lost: 0, first: [] })
    expect(outcomes.filter((outcome) => outcome.method === "POST").length).toBeGreaterThan(20)
    expect(outcomes.filter((outcome) => outcome.method === "GET").length).toBeGreaterThan(20)
    // Each replica served requests nginx sent it after its SIGTERM: the drain delay at work.
    expect.soft(servedInDelay.a).toBeGreaterThan(0)
    expect.soft(servedInDelay.b).toBeGreaterThan(0)
    // One upstream per request: no connection refused, reset or cut that nginx covered with a retry.
    const passedOn = nginx
      .accessLog()
      .slice(accessFrom)
      .filter((line) => line.serverPort === nginx.port && (line.upstream.includes(",") || line.upstreamStatus !== "200"))
    expect.soft(passedOn).toEqual([])
    expect.soft(nginx.errorLog().slice(errorsFrom).filter((line) => /\[(error|crit|alert|emerg)\]/.test(line))).toEqual([])
  })
})

// ---- steady load ---------------------------------------------------------------------------------

interface Outcome {
  readonly method: "GET" | "POST"
  readonly status: number
  readonly detail: string
}

/** Four clients sending without pause through nginx, GETs and POSTs with a 16 KiB body in turn, until stopped. */
const startLoad = (ids: ReadonlyArray<string>) => {
  let running = true
  const outcomes: Array<Outcome> = []
  const body = randomBytes(16 * 1024)
  const client = async (n: number) => {
    for (let i = 0; running; i++) {
      const id = ids[(n + i) % ids.length]!
      const method = i % 2 === 0 ? "GET" : "POST"
      try {
        const answer =
          method === "GET"
            ? await send(nginx.port, `${NS}/${id}/echo`, { from: `127.0.0.${20 + n}` })
            : await send(nginx.port, `${NS}/${id}/upload`, { from: `127.0.0.${20 + n}`, method, body })
        outcomes.push({ method, status: answer.status, detail: answer.status === 200 ? "" : answer.text })
      } catch (error) {
        outcomes.push({ method, status: 0, detail: String(error) })
      }
    }
  }
  const clients = [0, 1, 2, 3].map(client)
  return {
    stop: async () => {
      running = false
      await Promise.all(clients)
      return outcomes
    }
  }
}
