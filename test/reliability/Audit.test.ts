// The chaos audit finds what it is there to find: double activations, lost acknowledged
// writes, stale reads, replayed bodies, unknown errors, hangs and requests unanswered by a
// Pinboard that was up (reliability/chaos/audit.ts).
import { describe, expect, it } from "vitest"
import { answersDuring, audit, HANG, knownAnswers, type ClientRecord, type WorkerEvent } from "../../reliability/chaos/audit.js"
import { clientLeftOf } from "../../reliability/chaos/clientsLeft.js"
import { internalError } from "../../src/Errors.js"

const known = [{ status: 503, body: '{"error":"registry cold start, retry"}' }]
const write = (worker: string, id: string, epoch: string, value: number, op: string): WorkerEvent => ({ t: 0, worker, ev: "write", id, epoch, value, op })
const deliver = (worker: string, id: string, epoch: string, op: string): WorkerEvent => ({ t: 0, worker, ev: "deliver", id, epoch, op })
const acked = (id: string, op: string, value: number, answeredAt = 0): ClientRecord => ({
  kind: "increment",
  op,
  id,
  path: `/counters/${id}/increment`,
  via: "a",
  sentAt: 0,
  answeredAt,
  status: 200,
  body: JSON.stringify({ value })
})
const answer = (op: string, status: number, body: string): ClientRecord => ({ kind: "increment", op, id: "c1", path: "/counters/c1/increment", via: "a", sentAt: 0, answeredAt: 0, status, body })
const unanswered = (op: string, via: string, sentAt: number, answeredAt: number, error: string): ClientRecord => ({
  kind: "increment",
  op,
  id: "c1",
  path: "/counters/c1/increment",
  via,
  sentAt,
  answeredAt,
  error
})
const read = (op: string, value: number, sentAt: number): ClientRecord => ({
  kind: "read",
  op,
  id: "c1",
  path: "/counters/c1/value",
  via: "a",
  sentAt,
  answeredAt: sentAt + 1,
  status: 200,
  body: JSON.stringify({ value })
})

const clean = {
  events: [deliver("w1", "c1", "1", "a"), write("w1", "c1", "1", 1, "a"), deliver("w2", "c1", "2", "b"), write("w2", "c1", "2", 2, "b")],
  clients: [acked("c1", "a", 1, 10), acked("c1", "b", 2, 20), answer("c", 503, '{"error":"registry cold start, retry"}'), read("r", 1, 15)],
  finalValues: new Map([["c1", 2]]),
  known,
  pinboardDowns: [],
  clientsLeft: [],
  registryWipes: [],
  leaseMs: 1500
}

describe("the chaos audit", () => {
  it("passes a clean history", () => {
    const result = audit(clean)
    expect(result).toMatchObject({ requests: 4, acknowledged: 2, reads: 1, doubleActivations: 0, lostAcknowledged: 0, staleReads: 0, replayedBodies: 0, unknownErrors: 0 })
    expect(result.problems).toEqual([])
  })

  it("counts an epoch that accepted writes from two workers", () => {
    const result = audit({ ...clean, events: [...clean.events, write("w3", "c1", "2", 3, "x")] })
    expect(result.doubleActivations).toBe(1)
  })

  it("counts an older epoch writing at or above a newer epoch's first value", () => {
    const result = audit({ ...clean, events: [...clean.events, write("w1", "c1", "1", 2, "late")] })
    expect(result.doubleActivations).toBe(1)
  })

  it("counts a value acknowledged twice, and one above the final value, as lost", () => {
    expect(audit({ ...clean, clients: [...clean.clients, acked("c1", "d", 2)] }).lostAcknowledged).toBe(1)
    expect(audit({ ...clean, finalValues: new Map([["c1", 1]]) }).lostAcknowledged).toBe(1)
  })

  it("counts a read sent after an acknowledgement that returned less", () => {
    expect(audit({ ...clean, clients: [...clean.clients, read("s", 1, 25)] }).staleReads).toBe(1)
    expect(audit({ ...clean, clients: [...clean.clients, read("s", 1, 20)] }).staleReads).toBe(0)
  })

  it("tells apart, without failing, a request an activation took after a newer epoch of its id activated on another worker", () => {
    const activate = (worker: string, epoch: string, t: number): WorkerEvent => ({ t, worker, ev: "activate", id: "c1", epoch, value: 0 })
    const at = (event: WorkerEvent, t: number): WorkerEvent => ({ ...event, t })
    const events = [activate("w1", "1", 0), activate("w2", "2", 10), at(deliver("w1", "c1", "1", "late"), 11), at(deliver("w1", "c1", "1", "before"), 9), at(deliver("w2", "c1", "2", "own"), 12)]
    const result = audit({ ...clean, events })
    expect(result.lateOwners).toBe(1)
    expect(result.lateOwnerLines).toEqual(["c1: w1 at epoch 1 took late at 11, 1 ms after w2 activated epoch 2"])
    expect(result.problems).toEqual([])
    // A delivery to an activation the store found stale (no activate of its own) is no owner's.
    const stale: WorkerEvent = { t: 5, worker: "w3", ev: "stale", id: "c1", epoch: "0" }
    expect(audit({ ...clean, events: [activate("w2", "2", 10), stale, at(deliver("w3", "c1", "0", "refused"), 11)] }).lateOwners).toBe(0)
  })

  it("counts an activation less than a lease after a registry wipe, for a request sent after it, as a placement inside the cold start", () => {
    const activate = (worker: string, epoch: string, t: number): WorkerEvent => ({ t, worker, ev: "activate", id: "c1", epoch, value: 0 })
    const at = (event: WorkerEvent, t: number): WorkerEvent => ({ ...event, t })
    const sent = (op: string, sentAt: number, answeredAt: number): ClientRecord => ({ ...answer(op, 503, '{"error":"registry cold start, retry"}'), sentAt, answeredAt })
    const history = (activatedAt: number, ...requests: Array<ClientRecord>) => ({
      ...clean,
      events: [activate("w1", "9", activatedAt), at(deliver("w1", "c1", "9", "x"), activatedAt + 1)],
      clients: requests,
      finalValues: new Map([["c1", 1]]),
      registryWipes: [{ target: "redis", from: 9_900, to: 10_000 }]
    })
    const inside = audit(history(10_400, sent("x", 10_300, 10_402), sent("before", 9_000, 9_500), sent("later", 10_401, 10_500)))
    expect(inside.coldStartPlacements).toBe(1)
    expect(inside.problems).toEqual([
      "c1: w1 activated epoch 9 500 ms after the registry was wiped, for a request sent 300 ms or more after the wipe was done: placed inside the cold start (one lease, 1500 ms)"
    ])
    // A lease after the wipe's start (its first use may have come before the wipe was done); a
    // request for the id on its way since before the wipe was done (it may be the one, resolved
    // before the wipe); no request on its way.
    expect(audit(history(11_450, sent("x", 11_300, 11_452))).coldStartPlacements).toBe(0)
    expect(audit(history(10_400, sent("x", 10_300, 10_402), sent("read", 9_990, 10_420))).coldStartPlacements).toBe(0)
    expect(audit(history(10_400, sent("x", 10_401, 10_402))).coldStartPlacements).toBe(0)
  })

  it("counts a request sent after a newer epoch of its id was seen at a worker and delivered at an older one", () => {
    const at = (event: WorkerEvent, t: number): WorkerEvent => ({ ...event, t })
    const sentAt = (op: string, t: number): ClientRecord => ({ ...acked("c1", op, 0, t + 5), sentAt: t })
    const history = (sent: number) => ({
      ...clean,
      events: [at(deliver("w1", "c1", "5", "a"), 100), at(deliver("w2", "c1", "4", "late"), 300)],
      clients: [sentAt("a", 90), sentAt("late", sent)]
    })
    const backwards = audit(history(150))
    expect(backwards.epochsBackwards).toBe(1)
    expect(backwards.problems).toContain("c1: late, sent 50 ms after epoch 5 was seen at a worker, reached w2 at epoch 4")
    // Sent before epoch 5 was seen: resolved earlier and forwarded late (a paused Pinboard).
    expect(audit(history(99)).epochsBackwards).toBe(0)
    expect(audit(clean).epochsBackwards).toBe(0)
  })

  it("counts a body delivered twice", () => {
    expect(audit({ ...clean, events: [...clean.events, deliver("w2", "c1", "2", "a")] }).replayedBodies).toBe(1)
  })

  it("counts an answer that is no catalogue row, nor a 200 with a value", () => {
    const result = audit({
      ...clean,
      clients: [...clean.clients, answer("e", 500, "oops"), answer("f", 200, "??")]
    })
    expect(result.unknownErrors).toBe(2)
  })

  it("counts Pinboard's own 500 internal error as unknown: under faults it is a defect, not an answer", () => {
    expect(knownAnswers).not.toContainEqual({ status: internalError.status, body: internalError.body })
    expect(knownAnswers).toContainEqual({ status: 503, body: '{"error":"registry unavailable, retry"}' })
    const result = audit({ ...clean, known: knownAnswers, clients: [...clean.clients, answer("e", internalError.status, internalError.body)] })
    expect(result.unknownErrors).toBe(1)
  })

  it("counts requests without an answer apart, by error; only those sent to a Pinboard while it was down are excused", () => {
    const downs = [{ target: "b", from: 100, to: 200 }]
    const result = audit({
      ...clean,
      pinboardDowns: downs,
      clients: [
        ...clean.clients,
        unanswered("killed", "b", 90, 110, "ECONNRESET"),
        unanswered("refused", "b", 150, 151, "ECONNREFUSED"),
        unanswered("other", "a", 150, 151, "ECONNRESET"),
        unanswered("later", "b", 201, 202, "UND_ERR_SOCKET")
      ]
    })
    expect(result.unanswered).toEqual(new Map([["ECONNRESET", 2], ["ECONNREFUSED", 1], ["UND_ERR_SOCKET", 1]]))
    expect(result.unansweredWhileUp).toBe(2)
    expect(result.problems).toEqual(["other via a: sent at 150, ECONNRESET while it was up", "later via b: sent at 201, UND_ERR_SOCKET while it was up"])
    expect(result.unknownErrors).toBe(0)
  })

  it("counts a request without an answer within the client's timeout as a hang, even while its Pinboard was down", () => {
    const result = audit({ ...clean, pinboardDowns: [{ target: "a", from: 0, to: 9000 }], clients: [...clean.clients, unanswered("h", "a", 0, 8000, HANG)] })
    expect(result.hangs).toBe(1)
    expect(result.unansweredWhileUp).toBe(0)
  })

  it("says where a hang was waiting, from the 499 access line its Pinboard wrote when the client left", () => {
    const line = (fields: Record<string, unknown>) => JSON.stringify({ time: new Date(8_000).toISOString(), level: "info", message: "access", method: "POST", ...fields })
    const lines = [
      line({ path: "/counters/c1/increment", namespace: "/counters", id: "c1", status: 499, duration_ms: 7_990, worker: "w3", epoch: "12" }),
      line({ path: "/counters/c2/increment", namespace: "/counters", id: "c2", status: 499, duration_ms: 7_995 }),
      line({ path: "/counters/c1/increment", namespace: "/counters", id: "c1", status: 200, duration_ms: 3, worker: "w3", epoch: "12" }),
      "not json, but \"status\":499"
    ]
    const clientsLeft = lines.map((l) => clientLeftOf("a", l)).filter((left) => left !== undefined)
    expect(clientsLeft.map((left) => [left.id, left.receivedAt, left.worker])).toEqual([["c1", 10, "w3"], ["c2", 5, undefined]])
    const hung = (op: string, id: string, via = "a", sentAt = 0): ClientRecord => ({ ...unanswered(op, via, sentAt, sentAt + 8_000, HANG), id, path: `/counters/${id}/increment` })
    const result = audit({ ...clean, clientsLeft, clients: [hung("h1", "c1"), hung("h2", "c2"), hung("h3", "c1", "b"), hung("h4", "c1", "a", 5_000)] })
    expect(result.problems).toEqual([
      "h1 via a: sent at 0, no answer in 8000 ms; a saw the client leave after 7990 ms, waiting on w3 at epoch 12",
      "h2 via a: sent at 0, no answer in 8000 ms; a saw the client leave after 7995 ms, before any worker",
      "h3 via b: sent at 0, no answer in 8000 ms; b logged no 499 for it",
      "h4 via a: sent at 5000, no answer in 8000 ms; a logged no 499 for it"
    ])
  })

  it("tells what a target's clients were told while it was under a fault", () => {
    const clients = [
      answer("x", 503, '{"error":"registry unavailable, retry"}'),
      { ...acked("c1", "y", 3, 1200), sentAt: 1000 },
      { ...answer("z", 503, '{"error":"registry unavailable, retry"}'), via: "b" },
      unanswered("w", "a", 5000, 5001, "ECONNRESET")
    ]
    expect(answersDuring(clients, [{ target: "a", from: 0, to: 1000 }])).toEqual({
      requests: 2,
      answers: new Map([
        ['503 {"error":"registry unavailable, retry"}', { count: 1, slowestMs: 0 }],
        ["200", { count: 1, slowestMs: 200 }]
      ])
    })
  })
})
