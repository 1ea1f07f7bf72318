// The chaos audit finds what it is there to find: double activations, lost acknowledged
// writes, stale reads, replayed bodies and unknown errors (reliability/chaos/audit.ts).
import { describe, expect, it } from "vitest"
import { audit, knownAnswers, type ClientRecord, type WorkerEvent } from "../../reliability/chaos/audit.js"
import { internalError } from "../../src/Errors.js"

const known = [{ status: 503, body: '{"error":"registry cold start, retry"}' }]
const write = (worker: string, id: string, epoch: string, value: number, op: string): WorkerEvent => ({ t: 0, worker, ev: "write", id, epoch, value, op })
const deliver = (worker: string, id: string, epoch: string, op: string): WorkerEvent => ({ t: 0, worker, ev: "deliver", id, epoch, op })
const acked = (id: string, op: string, value: number, answeredAt = 0): ClientRecord => ({
  kind: "increment",
  op,
  id,
  sentAt: 0,
  answeredAt,
  status: 200,
  body: JSON.stringify({ value })
})
const answer = (op: string, status: number, body: string): ClientRecord => ({ kind: "increment", op, id: "c1", sentAt: 0, answeredAt: 0, status, body })
const read = (op: string, value: number, sentAt: number): ClientRecord => ({
  kind: "read",
  op,
  id: "c1",
  sentAt,
  answeredAt: sentAt + 1,
  status: 200,
  body: JSON.stringify({ value })
})

const clean = {
  events: [deliver("w1", "c1", "1", "a"), write("w1", "c1", "1", 1, "a"), deliver("w2", "c1", "2", "b"), write("w2", "c1", "2", 2, "b")],
  clients: [acked("c1", "a", 1, 10), acked("c1", "b", 2, 20), answer("c", 503, '{"error":"registry cold start, retry"}'), read("r", 1, 15)],
  finalValues: new Map([["c1", 2]]),
  known
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

  it("counts requests without an answer apart, by error", () => {
    const result = audit({ ...clean, clients: [...clean.clients, { kind: "increment", op: "g", id: "c1", sentAt: 0, answeredAt: 0, error: "ECONNREFUSED" }] })
    expect(result.unanswered.get("ECONNREFUSED")).toBe(1)
    expect(result.unknownErrors).toBe(0)
  })
})
