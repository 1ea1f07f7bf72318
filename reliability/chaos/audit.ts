// The chaos run's audit (docs/reliability.md "Chaos"), pure: from the workers' append-only
// logs, what every client was told and the counters' final stored values, it counts
// - double activations: two activations of an id whose accepted writes overlap: an epoch whose
//   writes came from two workers, or an older epoch that wrote a value at or above a newer
//   epoch's first write (the fenced store orders one id's writes; a newer owner starts from
//   the value it claimed);
// - lost acknowledged writes: an increment a client saw acknowledged that is not in the final
//   value (two acknowledgements of one value, or a value above the final one);
// - stale reads: a read through Pinboard that returned less than a value acknowledged before
//   the read was sent (an old owner still answering);
// - replayed bodies: a request body delivered to a worker more than once;
// - placements inside a cold start: an activation less than a lease after the whole registry
//   could first be used empty, while every request for its id then on its way had been sent
//   once the wipe was done: the request it was activated for was resolved on the empty
//   registry, so its placement came after the wipe and less than a lease after the bucket's
//   first use, inside the cold start (the registry places nothing for one lease after a
//   bucket's first use, docs/registry-api.md "Cold start");
// - epochs backwards: a request carrying an epoch of its id below one a worker had already seen
//   when the request was sent: it was resolved after that epoch was minted, so it must carry
//   that epoch or a newer one (docs/protocol.md "Time");
// - unknown errors: an answer that is neither a success, a catalogue row, nor one of the
//   counter's own refusals;
// - hangs: a request with no answer within the client's timeout;
// - unanswered while up: a request that got no answer (a reset, a closed connection) from a
//   Pinboard that was not killed while it was on its way.
// And, apart (no failure): late owners, requests an activation took after a newer epoch of its id
// had activated on another worker: two live owners at once, which the fenced store's refusal
// of the older epoch's writes hides from the counts above (the workers share one machine's clock,
// so their logs' times compare).
import { compareEpochs } from "../../src/contract/Epochs.js"
import { catalogue } from "../../src/Errors.js"
import { whereHung, type ClientLeft } from "./clientsLeft.js"

export type WorkerEvent =
  | { readonly t: number; readonly worker: string; readonly ev: "activate"; readonly id: string; readonly epoch: string; readonly value: number }
  | { readonly t: number; readonly worker: string; readonly ev: "deliver"; readonly id: string; readonly epoch: string; readonly op: string }
  | { readonly t: number; readonly worker: string; readonly ev: "write"; readonly id: string; readonly epoch: string; readonly value: number; readonly op: string }
  | { readonly t: number; readonly worker: string; readonly ev: "stale"; readonly id: string; readonly epoch: string }
  | { readonly t: number; readonly worker: string; readonly ev: "deactivate"; readonly id: string; readonly epoch: string; readonly reason: string }

/** What one client request was told. */
export interface ClientRecord {
  readonly kind: "increment" | "read"
  readonly op: string
  readonly id: string
  /** The request's path. */
  readonly path: string
  /** When it was sent and when its answer was in (ms). */
  readonly sentAt: number
  readonly answeredAt: number
  readonly status?: number
  readonly body?: string
  /** The request failed without an answer (a Pinboard killed, a connection reset). */
  readonly error?: string
  /** The Pinboard it was sent to. */
  readonly via: string
}

/** The `error` of a request that had no answer within the client's timeout. */
export const HANG = "TimeoutError"

/** A span of time a target spent under a fault (ms). */
export interface Window {
  readonly target: string
  readonly from: number
  readonly to: number
}

const overlaps = (record: ClientRecord, window: Window) =>
  record.via === window.target && record.sentAt <= window.to && window.from <= record.answeredAt

export interface KnownAnswer {
  readonly status: number
  readonly body: string
}

/**
 * The answers a run may meet that are not successes: every catalogue reply but a 500 (under
 * faults, an internal error is a defect, so it counts as unknown), and the counter worker's own
 * refusals.
 */
export const knownAnswers: ReadonlyArray<KnownAnswer> = [
  ...catalogue.map(({ example }) => example.reply).filter(({ status }) => status !== 500),
  { status: 409, body: JSON.stringify({ error: "stale epoch" }) },
  { status: 503, body: JSON.stringify({ error: "storage unavailable" }) }
].map(({ status, body }) => ({ status, body }))

export interface AuditInput {
  readonly events: ReadonlyArray<WorkerEvent>
  readonly clients: ReadonlyArray<ClientRecord>
  /** The stored counter of every id, read after the run. */
  readonly finalValues: ReadonlyMap<string, number>
  /** Catalogue rows and the counter's own refusals. */
  readonly known: ReadonlyArray<KnownAnswer>
  /** When each Pinboard was down: from its kill until it was healthy again. */
  readonly pinboardDowns: ReadonlyArray<Window>
  /** Pinboard's 499 access lines: where a hung request was waiting. */
  readonly clientsLeft: ReadonlyArray<ClientLeft>
  /**
   * Each wipe of the whole registry (a FLUSHALL, an empty restart): from the first moment it
   * could be used empty (its cold start begins no earlier) to when the wipe was done (a request
   * sent later is resolved on the empty registry), ms.
   */
  readonly registryWipes: ReadonlyArray<Window>
  /** The lease, which a cold start lasts (ms). */
  readonly leaseMs: number
}

export interface AuditResult {
  readonly requests: number
  readonly acknowledged: number
  readonly acceptedWrites: number
  readonly activations: number
  readonly doubleActivations: number
  readonly lostAcknowledged: number
  readonly reads: number
  readonly staleReads: number
  readonly replayedBodies: number
  readonly coldStartPlacements: number
  /**
   * Requests sent after a worker had seen an epoch of their id, delivered at a lower one. On
   * one redis-server a failure; on a cluster a failover can bring back a row the dead master
   * had not replicated its replacement of (the fence refuses its writes), so only reported.
   */
  readonly epochsBackwards: number
  readonly unknownErrors: number
  readonly hangs: number
  readonly unansweredWhileUp: number
  /** Non-success answers by `status body`. */
  readonly answers: ReadonlyMap<string, number>
  /** Requests that got no answer, by error. */
  readonly unanswered: ReadonlyMap<string, number>
  /**
   * Requests taken (delivered) by an activation after a newer epoch of its id had activated on
   * another worker. Not a failure by itself: a worker frozen between a request's arrival and
   * its delivery takes one after its lease, which the fence is there for.
   */
  readonly lateOwners: number
  /** A line per late owner's request. */
  readonly lateOwnerLines: ReadonlyArray<string>
  /** A line per violation, for the report. */
  readonly problems: ReadonlyArray<string>
}

const count = <K>(map: Map<K, number>, key: K) => map.set(key, (map.get(key) ?? 0) + 1)

export const audit = (input: AuditInput): AuditResult => {
  const problems: Array<string> = []
  let doubleActivations = 0

  // Accepted writes by id, then by epoch.
  const writes = new Map<string, Map<string, Array<Extract<WorkerEvent, { ev: "write" }>>>>()
  const delivered = new Map<string, number>()
  let activations = 0
  let acceptedWrites = 0
  for (const event of input.events) {
    if (event.ev === "activate") activations++
    if (event.ev === "deliver") count(delivered, event.op)
    if (event.ev !== "write") continue
    acceptedWrites++
    const byEpoch = writes.get(event.id) ?? new Map()
    writes.set(event.id, byEpoch)
    const list = byEpoch.get(event.epoch) ?? []
    byEpoch.set(event.epoch, list)
    list.push(event)
  }

  for (const [id, byEpoch] of writes) {
    const epochs = [...byEpoch.keys()].sort(compareEpochs)
    for (const epoch of epochs) {
      const list = byEpoch.get(epoch)!
      const workers = new Set(list.map((w) => w.worker))
      if (workers.size > 1) {
        doubleActivations++
        problems.push(`${id}: epoch ${epoch} accepted writes from ${[...workers].join(" and ")}`)
      }
    }
    for (let i = 1; i < epochs.length; i++) {
      const older = byEpoch.get(epochs[i - 1]!)!
      const newer = byEpoch.get(epochs[i]!)!
      const olderMax = Math.max(...older.map((w) => w.value))
      const newerMin = Math.min(...newer.map((w) => w.value))
      if (olderMax >= newerMin) {
        doubleActivations++
        problems.push(`${id}: epoch ${epochs[i - 1]} wrote ${olderMax}, at or above epoch ${epochs[i]}'s first write ${newerMin}`)
      }
    }
  }

  // Activations by id, in the order logged; a delivery to one of them after a newer epoch of the
  // id activated on another worker is a late owner's.
  const activated = new Map<string, Array<Extract<WorkerEvent, { ev: "activate" }>>>()
  for (const event of input.events) {
    if (event.ev !== "activate") continue
    const list = activated.get(event.id) ?? []
    activated.set(event.id, list)
    list.push(event)
  }
  let lateOwners = 0
  const lateOwnerLines: Array<string> = []
  for (const event of input.events) {
    if (event.ev !== "deliver") continue
    const list = activated.get(event.id) ?? []
    // A delivery to an activation that claimed its epoch (not one the store found stale).
    if (!list.some((a) => a.worker === event.worker && a.epoch === event.epoch && a.t <= event.t)) continue
    const newer = list.find((a) => a.worker !== event.worker && a.t < event.t && compareEpochs(a.epoch, event.epoch) > 0)
    if (newer === undefined) continue
    lateOwners++
    lateOwnerLines.push(
      `${event.id}: ${event.worker} at epoch ${event.epoch} took ${event.op} at ${event.t}, ${event.t - newer.t} ms after ${newer.worker} activated epoch ${newer.epoch}`
    )
  }

  // Placements inside a cold start: an activation less than a lease after a wipe's start while
  // the requests for its id on their way (the one it was activated for among them, whether an
  // increment or a read) had all been sent after the wipe's end.
  let coldStartPlacements = 0
  if (input.registryWipes.length > 0) {
    const requestsOf = new Map<string, Array<ClientRecord>>()
    for (const record of input.clients) {
      const list = requestsOf.get(record.id) ?? []
      requestsOf.set(record.id, list)
      list.push(record)
    }
    for (const event of input.events) {
      if (event.ev !== "activate") continue
      const wipe = input.registryWipes.find((w) => w.from <= event.t && event.t < w.from + input.leaseMs)
      if (wipe === undefined) continue
      const onTheirWay = (requestsOf.get(event.id) ?? []).filter((r) => r.sentAt <= event.t && event.t <= r.answeredAt)
      if (onTheirWay.length === 0 || onTheirWay.some((r) => r.sentAt < wipe.to)) continue
      coldStartPlacements++
      const firstSent = Math.min(...onTheirWay.map((r) => r.sentAt))
      problems.push(
        `${event.id}: ${event.worker} activated epoch ${event.epoch} ${event.t - wipe.from} ms after the registry was wiped, for a request sent ${firstSent - wipe.to} ms or more after the wipe was done: ` +
          `placed inside the cold start (one lease, ${input.leaseMs} ms)`
      )
    }
  }

  // Epochs only grow per id. A worker sees an epoch only after it was minted, so a request sent
  // later was resolved after that: it must carry that epoch or a newer one. A request resolved
  // earlier and forwarded late (its Pinboard paused) was sent earlier too, and is not counted.
  const firstSeen = new Map<string, Map<string, number>>()
  for (const event of input.events) {
    const seen = firstSeen.get(event.id) ?? new Map<string, number>()
    firstSeen.set(event.id, seen)
    if ((seen.get(event.epoch) ?? Infinity) > event.t) seen.set(event.epoch, event.t)
  }
  const sentAt = new Map(input.clients.map((record) => [record.op, record.sentAt]))
  let epochsBackwards = 0
  for (const event of input.events) {
    if (event.ev !== "deliver") continue
    const sent = sentAt.get(event.op)
    if (sent === undefined) continue
    for (const [epoch, t] of firstSeen.get(event.id) ?? []) {
      if (t >= sent || compareEpochs(epoch, event.epoch) <= 0) continue
      epochsBackwards++
      problems.push(`${event.id}: ${event.op}, sent ${sent - t} ms after epoch ${epoch} was seen at a worker, reached ${event.worker} at epoch ${event.epoch}`)
      break
    }
  }

  let replayedBodies = 0
  for (const [op, times] of delivered) {
    if (times > 1) {
      replayedBodies++
      problems.push(`body ${op} delivered ${times} times`)
    }
  }

  const acked = new Map<string, Map<number, string>>()
  const answers = new Map<string, number>()
  const unanswered = new Map<string, number>()
  const known = new Set(input.known.map((k) => `${k.status} ${k.body}`))
  let acknowledged = 0
  let lostAcknowledged = 0
  let unknownErrors = 0
  const acks = new Map<string, Array<{ readonly at: number; readonly value: number }>>()
  const reads: Array<{ readonly record: ClientRecord; readonly value: number }> = []
  let hangs = 0
  let unansweredWhileUp = 0
  for (const record of input.clients) {
    if (record.status === undefined) {
      count(unanswered, record.error ?? "no answer")
      if (record.error === HANG) {
        hangs++
        problems.push(`${record.op} via ${record.via}: sent at ${record.sentAt}, no answer in ${record.answeredAt - record.sentAt} ms; ${whereHung(record, input.clientsLeft)}`)
      } else if (!input.pinboardDowns.some((down) => overlaps(record, down))) {
        unansweredWhileUp++
        problems.push(`${record.op} via ${record.via}: sent at ${record.sentAt}, ${record.error ?? "no answer"} while it was up`)
      }
      continue
    }
    if (record.status === 200) {
      const value = parseValue(record.body)
      if (value === undefined) {
        unknownErrors++
        problems.push(`${record.op}: 200 with an unreadable body ${JSON.stringify(record.body)}`)
        continue
      }
      if (record.kind === "read") {
        reads.push({ record, value })
        continue
      }
      acknowledged++
      const values = acked.get(record.id) ?? new Map<number, string>()
      acked.set(record.id, values)
      const earlier = values.get(value)
      if (earlier !== undefined) {
        lostAcknowledged++
        problems.push(`${record.id}: value ${value} acknowledged to both ${earlier} and ${record.op}`)
      }
      values.set(value, record.op)
      const list = acks.get(record.id) ?? []
      acks.set(record.id, list)
      list.push({ at: record.answeredAt, value })
      continue
    }
    const answer = `${record.status} ${record.body ?? ""}`
    count(answers, answer)
    if (!known.has(answer)) {
      unknownErrors++
      problems.push(`${record.op}: unknown answer ${answer}`)
    }
  }
  // A read sent after an acknowledgement must see that value or a later one.
  let staleReads = 0
  for (const list of acks.values()) list.sort((a, b) => a.at - b.at)
  for (const { record, value } of reads) {
    let seen = -1
    for (const ack of acks.get(record.id) ?? []) {
      if (ack.at >= record.sentAt) break
      seen = Math.max(seen, ack.value)
    }
    if (value < seen) {
      staleReads++
      problems.push(`${record.id}: ${record.op} read ${value} after ${seen} was acknowledged`)
    }
  }
  for (const [id, values] of acked) {
    const final = input.finalValues.get(id) ?? 0
    for (const [value, op] of values) {
      if (value > final) {
        lostAcknowledged++
        problems.push(`${id}: ${op} acknowledged ${value}, final value ${final}`)
      }
    }
  }

  return {
    requests: input.clients.length,
    acknowledged,
    acceptedWrites,
    activations,
    doubleActivations,
    lostAcknowledged,
    reads: reads.length,
    staleReads,
    replayedBodies,
    coldStartPlacements,
    epochsBackwards,
    unknownErrors,
    hangs,
    unansweredWhileUp,
    answers,
    unanswered,
    lateOwners,
    lateOwnerLines,
    problems
  }
}

const parseValue = (body: string | undefined): number | undefined => {
  try {
    const value = (JSON.parse(body ?? "") as { value?: unknown }).value
    return typeof value === "number" && Number.isSafeInteger(value) ? value : undefined
  } catch {
    return undefined
  }
}

/** What the clients of a target were told while it was under a fault, and how long the slowest of each answer took. */
export interface AnswersDuring {
  readonly requests: number
  /** By `200`, `status body`, or the error of a request without an answer. */
  readonly answers: ReadonlyMap<string, { readonly count: number; readonly slowestMs: number }>
}

export const answersDuring = (clients: ReadonlyArray<ClientRecord>, windows: ReadonlyArray<Window>): AnswersDuring => {
  const answers = new Map<string, { count: number; slowestMs: number }>()
  let requests = 0
  for (const record of clients) {
    if (!windows.some((window) => overlaps(record, window))) continue
    requests++
    const key = record.status === undefined ? (record.error ?? "no answer") : record.status === 200 ? "200" : `${record.status} ${record.body ?? ""}`
    const seen = answers.get(key) ?? { count: 0, slowestMs: 0 }
    answers.set(key, { count: seen.count + 1, slowestMs: Math.max(seen.slowestMs, record.answeredAt - record.sentAt) })
  }
  return { requests, answers }
}
