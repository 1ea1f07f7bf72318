// The worker library in hostname-aware mode, end to end (docs/worker.md "Hostname-aware mode";
// docs/config.md, docs/proxy.md "Hostname-aware mode", docs/worker.md): library worker processes (test/fixtures/library-worker.mjs) registering
// their namespace for a hostname in an env, behind the built Pinboard on a real redis-server
// with hostnameAware on. Hostnames a.example and b.example are env prod (takeover wind_down),
// s.example env staging.
import WebSocket from "ws"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually, registryCall, TOKEN, uid } from "../support/Fleet.js"
import { runInspect } from "../support/InspectRun.js"
import { LibraryFleet, type LibraryWorker } from "../support/LibraryFleet.js"
import { request, type Answer } from "../support/Wire.js"
import { scaled } from "../support/Time.js"

const NS = "/notes"
const IDLE_MS = 1500

interface Counted {
  readonly worker: string
  readonly epoch: string
  readonly count: number
}

interface State extends Counted {
  readonly env: string
  readonly hostname: string | null
}

const lf = new LibraryFleet()
let la: LibraryWorker
let lb: LibraryWorker
let ls: LibraryWorker

beforeAll(async () => {
  // A longer lease than the default, so that a release before the wind-down deadline (one
  // lease) is told apart from the deadline passing on a loaded machine.
  await lf.start({ config: { hostnameAware: true }, leaseMs: 6_000 })
  ;[la, lb, ls] = await Promise.all([
    lf.worker({ id: uid("la"), namespaces: [NS], hostnames: [{ hostname: "a.example", env: "prod" }] }),
    lf.worker({ id: uid("lb"), namespaces: [NS], hostnames: [{ hostname: "b.example", env: "prod" }] }),
    lf.worker({ id: uid("ls"), namespaces: [NS], hostnames: [{ hostname: "s.example", env: "staging" }], idleMs: IDLE_MS })
  ])
}, scaled(60_000))

afterAll(async () => {
  await lf.stop()
})

const via = (hostname: string, id: string, rest: string, method = "GET") =>
  request(lf.pinboard, `${NS}/${id}${rest}`, { method, headers: { host: hostname } })

const ok = <A>(answer: Answer): A => {
  if (answer.status !== 200) throw new Error(`expected 200, got ${answer.status}: ${answer.text}`)
  return JSON.parse(answer.text) as A
}

const increment = async (hostname: string, id: string): Promise<Counted> => ok<Counted>(await via(hostname, id, "/increment", "POST"))

describe("the worker library in hostname-aware mode", () => {
  it("serves each hostname from its own workers, each env with its own activation and data; the instance sees its env and hostname", async () => {
    const id = uid("n")
    expect(await increment("a.example", id)).toMatchObject({ worker: la.id, count: 1 })
    expect(await increment("a.example", id)).toMatchObject({ worker: la.id, count: 2 })
    // The same id on a hostname of another env is another placement, with its own stored count.
    expect(await increment("s.example", id)).toMatchObject({ worker: ls.id, count: 1 })
    expect(ok<State>(await via("a.example", id, "/state"))).toMatchObject({ worker: la.id, env: "prod", count: 2, hostname: "a.example" })
    expect(ok<State>(await via("s.example", id, "/state"))).toMatchObject({ worker: ls.id, env: "staging", count: 1, hostname: "s.example" })
    expect(lf.events(la.id, id).map((e) => [e.event, e.env])).toEqual([["activate", "prod"]])
  })

  it("takeover wind_down: the owner winds down, stores its state and releases before the deadline; the new hostname's worker carries on", async () => {
    const id = uid("t")
    for (let n = 1; n <= 3; n++) await increment("a.example", id)
    const first = ok<State>(await via("a.example", id, "/state"))
    const during = await via("b.example", id, "/increment", "POST")
    expect([during.status, during.text]).toEqual([503, '{"error":"takeover in progress, retry"}'])
    expect(Number(during.headers["retry-after"])).toBeGreaterThanOrEqual(1)

    const taken = await eventually(() => increment("b.example", id), lf.pinboard.leaseMs + 5_000)
    expect(taken.worker).toBe(lb.id)
    expect(taken.count).toBe(4)
    expect(BigInt(taken.epoch) > BigInt(first.epoch)).toBe(true)

    const windDown = lf.events(la.id, id).find((e) => e.event === "winddown")!
    const ended = lf.events(la.id, id).find((e) => e.event === "deactivate")!
    expect([windDown.env, windDown.epoch, ended.env, ended.reason]).toEqual(["prod", first.epoch, "prod", "wind-down"])
    // Released by the library (in env prod), not lapsed: the id moved before Pinboard's deadline.
    const moved = lf.events(lb.id, id).find((e) => e.event === "activate")!
    expect(moved.t).toBeLessThan(windDown.deadline!)
  })

  it("calls from an instance go through the caller's hostname with its env in Pinboard-Caller", async () => {
    for (const [hostname, worker] of [
      ["a.example", la.id],
      ["s.example", ls.id]
    ] as const) {
      const id = uid("c")
      const answer = ok<{ worker: string; id: string; depth: number; caller: string }>(await via(hostname, id, "/chain?to=2", "POST"))
      expect(answer).toEqual({ worker, id: `${id}.2`, depth: 2, caller: `${NS}/${id}.1` })
    }
  })

  it("idle eviction releases the placement in its env", async () => {
    const id = uid("i")
    await increment("s.example", id)
    const placement = (env: string) => registryCall(lf.pinboard, "GET", `/registry/placements/${NS.slice(1)}/${id}?env=${env}`)
    expect((await placement("staging")).json).toMatchObject({ env: "staging", worker: ls.id, live: true })
    await eventually(async () => expect((await placement("staging")).status).toBe(404), IDLE_MS + 5_000)
    expect(lf.events(ls.id, id).find((e) => e.event === "deactivate")).toMatchObject({ env: "staging", reason: "idle" })
    // Placed anew at a higher epoch, the count carries on from storage.
    expect(await increment("s.example", id)).toMatchObject({ worker: ls.id, count: 2 })
  })

  it("pinboard inspect id --host counts only the workers registered for that hostname", async () => {
    const candidates = async (env: string, host: string) => {
      const run = await runInspect(["id", NS, uid("q"), "--env", env, "--host", host, "--pinboard", lf.pinboard.url, "--json"], { PINBOARD_TOKEN: TOKEN })
      expect(run.code, run.stderr).toBe(0)
      return (JSON.parse(run.stdout) as { resolve: { workers: Array<{ worker: string }> } }).resolve.workers.map((w) => w.worker)
    }
    expect(await candidates("prod", "a.example")).toEqual([la.id])
    expect(await candidates("prod", "B.Example")).toEqual([lb.id])
    expect(await candidates("staging", "s.example")).toEqual([ls.id])
    expect(await candidates("staging", "a.example")).toEqual([])
  })

  it("carries a WebSocket to the hostname's worker, which sees its env and hostname", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${lf.pinboard.port}${NS}/${uid("w")}/ws`, { headers: { host: "b.example" } })
    const info = await new Promise<Record<string, unknown>>((resolve, reject) => {
      ws.once("message", (data) => resolve(JSON.parse(data.toString()) as Record<string, unknown>))
      ws.once("error", reject)
    })
    ws.close()
    expect(info).toMatchObject({ worker: lb.id, env: "prod", hostname: "b.example", depth: 0 })
  })
})
