// `pinboard inspect` (docs/inspect.md) as the built binary runs it, against a live Pinboard on the
// embedded registry with two fixture workers and a draining one: what it lists, what it predicts
// for an id and whether the placement then goes there, the JSON forms and the exit codes.
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bucketOf } from "../../src/contract/Bucket.js"
import {
  BUCKETS,
  Fleet,
  LEASE_MS,
  type Pinboard,
  placementOf,
  registryCall,
  STANDARD_CONFIG,
  TOKEN,
  uid,
  type VirtualWorker,
  waitForColdStart,
  type Worker
} from "../support/Fleet.js"
import { runInspect } from "../support/InspectRun.js"
import { freePort } from "../support/Processes.js"
import { request } from "../support/Wire.js"
import { scaled } from "../support/Time.js"

/** The label of a line of `inspect id`'s text, and what follows it. */
const field = (stdout: string, label: string): string => {
  const found = stdout.split("\n").find((line) => line.startsWith(`${label.padEnd(11)} `))
  if (found === undefined) throw new Error(`no "${label}" line in:\n${stdout}`)
  return found.slice(12)
}

describe("pinboard inspect", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  let a: Worker
  let b: Worker
  let draining: VirtualWorker
  /** Pinboard's own configuration, as the environment gives it. */
  let env: Record<string, string>
  const run = (...args: ReadonlyArray<string>) => runInspect(args, env)

  beforeAll(async () => {
    pinboard = await fleet.pinboard({ config: STANDARD_CONFIG })
    ;[a, b, draining] = await Promise.all([
      fleet.worker(pinboard, { id: uid("wa"), namespaces: ["/threads", "/pair"] }),
      fleet.worker(pinboard, { id: uid("wb"), namespaces: ["/pair"] }),
      fleet.virtualWorker(pinboard, { id: uid("wd"), advertiseUrl: "http://127.0.0.1:9/", namespaces: ["/pair"], draining: true })
    ])
    env = {
      PINBOARD_TOKEN: TOKEN,
      PINBOARD_PORT: String(pinboard.port),
      PINBOARD_HOST: "127.0.0.1",
      PINBOARD_LEASE_MS: String(LEASE_MS),
      PINBOARD_BUCKETS: String(BUCKETS)
    }
    await waitForColdStart(pinboard, "/threads")
  }, scaled(60_000))

  afterAll(async () => {
    await fleet.stop()
  })

  /** "lease left (s)": seconds with one decimal, at most a lease (LEASE_MS scales with PINBOARD_TEST_TIME_SCALE). */
  const withinALease = expect.toSatisfy(
    (cell: string) => /^\d+\.\d$/.test(cell) && Number(cell) <= LEASE_MS / 1000,
    `seconds with one decimal, at most ${LEASE_MS / 1000}`
  )

  it("lists the workers with lease left, headroom and flags", async () => {
    const { code, stdout, stderr } = await run("workers")
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" })
    const lines = stdout.trimEnd().split("\n")
    expect(lines[0]).toBe(`Pinboard ${pinboard.url}: 3 workers (bucket 0's copy of the membership)`)
    expect(lines[1]!.split(/\s{2,}/)).toEqual(["worker", "advertiseUrl", "namespaces", "lease left (s)", "headroom", "draining", "degraded", "nacks"])
    const rows = new Map(lines.slice(2).map((line) => line.split(/\s+/)).map((cells) => [cells[0], cells]))
    expect(rows.get(a.id)).toEqual([a.id, a.advertiseUrl, "/threads,/pair", withinALease, "10", "no", "no", "0"])
    expect(rows.get(b.id)).toEqual([b.id, b.advertiseUrl, "/pair", withinALease, "10", "no", "no", "0"])
    expect(rows.get(draining.id)?.slice(2)).toEqual(["/pair", withinALease, "10", "yes", "no", "0"])
  })

  it("prints the listing as JSON with --json", async () => {
    const { code, stdout } = await run("workers", "--json")
    expect(code).toBe(0)
    const report = JSON.parse(stdout) as { pinboard: string; now: number; workers: Array<Record<string, unknown>> }
    const listed = (await registryCall(pinboard, "GET", "/registry/workers")).json as { workers: Array<Record<string, unknown>> }
    expect(report.pinboard).toBe(pinboard.url)
    expect(report.workers.map(({ leaseLeftMs: _, leaseExpiresAt: __, ...rest }) => rest)).toEqual(
      listed.workers.map(({ leaseExpiresAt: _, ...rest }) => rest)
    )
    for (const worker of report.workers) {
      expect(worker.leaseLeftMs).toBe((worker.leaseExpiresAt as number) - report.now)
      expect(worker.leaseLeftMs).toBeGreaterThan(0)
      expect(worker.leaseLeftMs).toBeLessThanOrEqual(LEASE_MS)
    }
  })

  it("shows a placed id: its bucket, its placement, and that a resolve forwards to the owner", async () => {
    const id = uid("t")
    expect((await request(pinboard, `/threads/${id}/echo`)).status).toBe(200)
    const row = (await placementOf(pinboard, "/threads", id))!
    const [{ code, stdout }, asJson] = await Promise.all([run("id", "threads", id), run("id", "/threads", id, "--json")])
    expect(code).toBe(0)
    expect(field(stdout, "id")).toBe(`/threads/${id} (env "")`)
    expect(field(stdout, "bucket")).toBe(`${bucketOf("", "/threads", id, BUCKETS)} of ${BUCKETS}`)
    expect(field(stdout, "placement")).toMatch(
      new RegExp(`^${a.id}, epoch ${row.epoch}, placed \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z \\(\\d+\\.\\d s ago\\), tag "", live$`)
    )
    expect(field(stdout, "resolve")).toBe(`forwarded to ${a.id} at epoch ${row.epoch}`)

    const json = JSON.parse(asJson.stdout) as Record<string, unknown>
    expect(json).toMatchObject({
      namespace: "/threads",
      id,
      env: "",
      bucket: bucketOf("", "/threads", id, BUCKETS),
      buckets: BUCKETS,
      placement: { worker: a.id, epoch: row.epoch, live: true, tag: "" },
      resolve: { _tag: "Forward", worker: a.id, epoch: row.epoch }
    })
  })

  it("explains where an id not yet placed would go, and the placement goes there", async () => {
    const id = uid("p")
    // The request below comes from 127.0.0.1, Pinboard's affinity by default (affinity.key "ip").
    const { code, stdout } = await run("id", "pair", id, "--affinity", "127.0.0.1")
    expect(code).toBe(0)
    expect(field(stdout, "placement")).toBe("not placed")
    expect(field(stdout, "resolve")).toBe("a new placement")
    const rows = new Map(stdout.split("\n").filter((line) => line.startsWith("  ")).map((line) => line.trim().split(/\s{2,}/)).map((c) => [c[0], c]))
    expect(rows.get("worker")).toEqual(["worker", "headroom", "lease left (s)", "candidate", "rendezvous"])
    expect(rows.get(a.id)?.[3]).toBe("yes")
    expect(rows.get(b.id)?.[3]).toBe("yes")
    expect(rows.get(draining.id)?.[3]).toBe("no: draining")
    const preferred = field(stdout, "preferred").split(",")[0]!
    expect([a.id, b.id]).toContain(preferred)
    expect(field(stdout, "preferred")).toContain('by rendezvous: greatest sha1(affinity + "\\n" + worker) for affinity "127.0.0.1"')
    expect(field(stdout, "headroom")).toBe("10 >= 8 (mean 10 / balanceFactor 1.25): the preference holds")
    expect(field(stdout, "result")).toMatch(new RegExp(`^placed on ${preferred} at a new epoch`))

    expect((await request(pinboard, `/pair/${id}/echo`)).status).toBe(200)
    expect((await placementOf(pinboard, "/pair", id))?.worker).toBe(preferred)
  })

  it("says what a caller and the default affinity change, and gives the explanation as JSON", async () => {
    const id = uid("p")
    const [byCaller, byDefault, { code, stdout }] = await Promise.all([
      run("id", "/pair", id, "--caller", b.id),
      run("id", "/pair", id),
      run("id", "pair", id, "--caller", draining.id, "--json")
    ])
    expect(field(byCaller.stdout, "caller")).toBe(`${b.id} is a candidate: it is preferred`)
    expect(field(byCaller.stdout, "preferred")).toBe(`${b.id}, the caller's worker`)
    expect(byDefault.stdout).toContain('affinity "" (the default here; Pinboard uses the client IP: pass it with --affinity)')
    expect(code).toBe(0)
    const json = JSON.parse(stdout) as { placement: unknown; resolve: Record<string, unknown> }
    expect(json.placement).toBeNull()
    expect(json.resolve).toMatchObject({
      _tag: "Place",
      ended: null,
      minLeaseLeftMs: Math.min(5000, LEASE_MS / 3),
      affinity: "",
      caller: { worker: draining.id, status: "not-candidate" },
      outcome: { _tag: "Chosen", preferredBy: "rendezvous", holds: true, meanHeadroom: 10, threshold: 8 }
    })
    const workers = json.resolve.workers as Array<{ worker: string; exclusions: Array<string> }>
    expect(workers.map((w) => [w.worker, w.exclusions])).toEqual(
      [[a.id, []], [b.id, []], [draining.id, ["draining"]]].sort((x, y) => ((x[0] as string) < (y[0] as string) ? -1 : 1))
    )
  })

  it("reads the token and the port from the config file, and takes --pinboard over them", async () => {
    const file = join(fleet.dir, `${uid("inspect-config")}.json`)
    writeFileSync(file, JSON.stringify({ token: TOKEN, port: pinboard.port, host: "0.0.0.0", buckets: BUCKETS }))
    const [fromFile, overridden] = await Promise.all([
      runInspect(["workers", "--config", file], {}),
      runInspect(["workers", "--pinboard", `${pinboard.url}/`], { PINBOARD_TOKEN: TOKEN, PINBOARD_PORT: String(await freePort()) })
    ])
    expect(fromFile.code).toBe(0)
    expect(fromFile.stdout.split("\n")[0]).toBe(`Pinboard http://127.0.0.1:${pinboard.port}: 3 workers (bucket 0's copy of the membership)`)
    expect(overridden.code).toBe(0)
    expect(overridden.stdout.split("\n")[0]).toBe(`Pinboard ${pinboard.url}: 3 workers (bucket 0's copy of the membership)`)
  })

  it("exits 1 with Pinboard's status and body on a wrong token", async () => {
    const { code, stdout, stderr } = await runInspect(["workers"], { ...env, PINBOARD_TOKEN: "not-the-token" })
    expect({ code, stdout }).toEqual({ code: 1, stdout: "" })
    expect(stderr).toBe(`pinboard inspect: GET ${pinboard.url}/registry/workers answered 401: {"error":"invalid deployment token"}\n`)
  })

  it("exits 1 when Pinboard cannot be reached", async () => {
    const port = await freePort()
    const { code, stdout, stderr } = await run("id", "pair", "x", "--pinboard", `http://127.0.0.1:${port}`)
    expect({ code, stdout }).toEqual({ code: 1, stdout: "" })
    expect(stderr).toMatch(new RegExp(`^pinboard inspect: cannot reach Pinboard: GET http://127\\.0\\.0\\.1:${port}/registry/\\S+: connect ECONNREFUSED`))
  })

  it("exits 2 on bad usage or configuration, and prints the usage with --help", async () => {
    const cases: Array<[ReadonlyArray<string>, Record<string, string>, RegExp]> = [
      [[], env, /^pinboard inspect: expected a subcommand: workers or id\nRun `pinboard inspect --help` for the usage\.\n$/],
      [["id", "pair", "a/b"], env, /^pinboard inspect: id: expected 1-256 characters of \[A-Za-z0-9._~-\], got "a\/b"\n/],
      [["workers", "--caller", "w"], env, /^pinboard inspect: --caller applies to inspect id only\n/],
      [["workers", "--nope"], env, /^pinboard inspect: Unknown option '--nope'/],
      [["workers"], { PINBOARD_PORT: "8080" }, /^pinboard inspect: invalid configuration: token: required/]
    ]
    const [help, ...runs] = await Promise.all([runInspect(["--help"], {}), ...cases.map(([args, withEnv]) => runInspect(args, withEnv))])
    runs.forEach((result, i) => {
      expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 2, stdout: "" })
      expect(result.stderr).toMatch(cases[i]![2])
    })
    expect(help.code).toBe(0)
    expect(help.stdout).toMatch(/^Usage:\n {2}pinboard inspect workers \[--pinboard URL\] \[--json\]\n/)
  })
})

describe("pinboard inspect on a fleet whose list passes 1 MiB", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  let env: Record<string, string>
  const run = (...args: ReadonlyArray<string>) => runInspect(args, env)
  // 20 records of about 60 KB (an advertiseUrl near the 64 KiB body limit): about 1.15 MiB, so
  // Pinboard answers `GET /registry/workers` in two pages. "~solo" sorts after them all (`~`
  // is the last character of a worker id): only the second page has it.
  const BIG = Array.from({ length: 20 }, (_, i) => `big-${String(i).padStart(2, "0")}`)
  const BIG_URL = `http://127.0.0.1:9/${"p".repeat(60_000)}`
  const SOLO = "~solo"
  const LONG_LEASE_MS = 120_000

  beforeAll(async () => {
    pinboard = await fleet.pinboard({ leaseMs: LONG_LEASE_MS })
    const registrations = [
      ...BIG.map((worker) => ({ worker, advertiseUrl: BIG_URL, namespaces: ["/pair"], headroom: 10 })),
      { worker: SOLO, advertiseUrl: "http://127.0.0.1:9/", namespaces: ["/solo"], headroom: 10 }
    ]
    for (const answer of await Promise.all(registrations.map((body) => registryCall(pinboard, "POST", "/registry/workers", body)))) {
      expect(answer.status, answer.text).toBe(200)
    }
    env = {
      PINBOARD_TOKEN: TOKEN,
      PINBOARD_PORT: String(pinboard.port),
      PINBOARD_HOST: "127.0.0.1",
      PINBOARD_LEASE_MS: String(LONG_LEASE_MS),
      PINBOARD_BUCKETS: String(BUCKETS)
    }
    // The premise: the first answer stops short of "~solo" and says where to go on.
    const first = (await registryCall(pinboard, "GET", "/registry/workers")).json as { workers: Array<{ worker: string }>; next?: string }
    expect(first.next).toBeDefined()
    expect(first.workers.map((w) => w.worker)).not.toContain(SOLO)
  }, scaled(60_000))

  afterAll(async () => {
    await fleet.stop()
  })

  it("workers lists every page: the whole fleet, the worker only on the second page included", async () => {
    const { code, stdout, stderr } = await run("workers", "--json")
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" })
    const report = JSON.parse(stdout) as { workers: Array<{ worker: string }> }
    expect(report.workers.map((w) => w.worker)).toEqual([...BIG, SOLO])
  })

  it("id counts the worker only on the second page among the candidates", async () => {
    const { code, stdout, stderr } = await run("id", "solo", uid("s"))
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" })
    const rows = new Map(stdout.split("\n").filter((line) => line.startsWith("  ")).map((line) => line.trim().split(/\s{2,}/)).map((c) => [c[0], c]))
    expect(rows.get(SOLO)?.[3]).toBe("yes")
    expect(field(stdout, "result")).toMatch(new RegExp(`^placed on ${SOLO.replace("~", "\\~")} at a new epoch`))
  })
})
