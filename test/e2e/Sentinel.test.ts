// Redis with Sentinel (docs/deploy.md "Redis with Sentinel"): a master and a replica under
// three sentinels that require a password, Pinboard under the documented ACL user. The master
// is killed mid-run: every answer meanwhile is the id's owner at its epoch or `503 registry
// unavailable, retry`, never a 500; after the failover Pinboard follows the new master and the
// ids placed before it keep their owners and epochs.
import { readFileSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Fleet, uid, waitForColdStart, type Pinboard } from "../support/Fleet.js"
import { SENTINEL_MASTER, SENTINEL_PASSWORD, startSentinelSet, type SentinelSet } from "../support/SecureRedis.js"
import { poll, scaled } from "../support/Time.js"
import { request } from "../support/Wire.js"

const NS = "/threads"
const PASSWORD = "pinboard-secret-2"
const UNAVAILABLE = '{"error":"registry unavailable, retry"}'
/** Longer than a failover (down after 1 s, then an election) plus a heartbeat interval. */
const LEASE_MS = scaled(8000)

const documentedAclRule = (prefix: string): string => {
  const page = readFileSync(new URL("../../docs/deploy.md", import.meta.url), "utf8")
  const line = /^ACL SETUSER pinboard (.*)$/m.exec(page)?.[1]
  if (line === undefined) throw new Error("docs/deploy.md has no `ACL SETUSER pinboard ...` line")
  return line.replace(">PASSWORD", `>${PASSWORD}`).replace("~{pb:*", `~{${prefix}:*`)
}

interface Owner {
  readonly status: number
  readonly text: string
  readonly worker: string | undefined
  readonly epoch: string | undefined
}

const ownerOf = async (pinboard: Pinboard, id: string): Promise<Owner> => {
  const answer = await request(pinboard, `${NS}/${id}/echo`)
  const worker = answer.status === 200 ? (JSON.parse(answer.text) as { worker: string }).worker : undefined
  const epoch = answer.headers["pinboard-epoch"]
  return { status: answer.status, text: answer.text, worker, epoch: typeof epoch === "string" ? epoch : undefined }
}

let fleet: Fleet
let set: SentinelSet
const prefix = uid("pb")

beforeAll(async () => {
  fleet = new Fleet()
  set = await startSentinelSet([`pinboard ${documentedAclRule(prefix)}`])
}, scaled(60_000))
afterAll(async () => {
  await fleet?.stop()
  await set?.stop()
})

describe("Redis with Sentinel", () => {
  it("follows a failover: ids keep their owners and epochs, answers meanwhile are 503 registry unavailable, never a 500", async () => {
    const pinboard = await fleet.pinboard({
      leaseMs: LEASE_MS,
      env: {
        PINBOARD_REDIS_SENTINELS: set.sentinels,
        PINBOARD_REDIS_SENTINEL_MASTER: SENTINEL_MASTER,
        PINBOARD_REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
        PINBOARD_REDIS_USERNAME: "pinboard",
        PINBOARD_REDIS_PASSWORD: PASSWORD,
        PINBOARD_REDIS_PREFIX: prefix
      }
    })
    await Promise.all([fleet.worker(pinboard, { id: uid("wa"), namespaces: [NS] }), fleet.worker(pinboard, { id: uid("wb"), namespaces: [NS] })])
    await waitForColdStart(pinboard, NS)
    const ids = Array.from({ length: 24 }, () => uid("t"))
    const before = new Map<string, Owner>()
    for (const id of ids) before.set(id, await ownerOf(pinboard, id))
    expect([...before.values()].every((o) => o.status === 200)).toBe(true)
    // The placements are on the replica before the master goes (docs/deploy.md: what a failover loses is what was not).
    expect(set.cli(set.masterPort, "WAIT", "1", "2000")).toBe("1")

    await set.kill(set.masterPort)
    const unexpected: Array<unknown> = []
    let unavailable = 0
    const served = new Set<string>()
    const killedAt = performance.now()
    let promotedAfterMs: number | undefined
    await poll(
      async () => {
        for (const id of ids) {
          const now = await ownerOf(pinboard, id)
          const was = before.get(id)!
          if (now.status === 200 && now.worker === was.worker && now.epoch === was.epoch) served.add(id)
          else if (now.status === 503 && now.text === UNAVAILABLE) {
            unavailable++
            served.delete(id)
          } else unexpected.push({ id, status: now.status, text: now.text, worker: now.worker, epoch: now.epoch, was: [was.worker, was.epoch] })
        }
        if (promotedAfterMs === undefined && set.currentMasterPort() === set.replicaPort) promotedAfterMs = Math.round(performance.now() - killedAt)
        return promotedAfterMs !== undefined && served.size === ids.length
      },
      // An election that splits is tried again after twice failover-timeout: room for two of them.
      { timeoutMs: 60_000, everyMs: 100, reason: "the failover, then every id served by its owner at its epoch" }
    ).catch((error: Error) => {
      const seen = { master: set.currentMasterPort(), replica: set.replicaPort, promotedAfterMs, served: served.size, of: ids.length, unavailable, unexpected }
      const log = pinboard.process.lines.filter((line) => !line.includes('"message":"access"')).slice(-30)
      throw new Error(`${error.message}; seen: ${JSON.stringify(seen)}; pinboard's log:\n${log.join("\n")}`)
    })
    expect(unexpected).toEqual([])
    // The window was seen: requests between the kill and the promotion found no master.
    expect(unavailable).toBeGreaterThan(0)
    // The new master places new ids too.
    const fresh = await ownerOf(pinboard, uid("t"))
    expect(fresh.status).toBe(200)
    expect((await request(pinboard, "/readyz")).status).toBe(200)
  }, scaled(120_000))
})
