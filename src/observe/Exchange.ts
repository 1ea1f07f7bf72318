// One instance exchange as its observers see it: the facts the pipeline returns (namespace and
// id, the worker and epoch it forwarded to), the answer Pinboard wrote itself if it did, and
// the status the client was sent. Once the exchange is over, one call counts it, writes its
// access line and ends its span. With metrics, the access log and traces off, the observer
// is one that records nothing and waits for nothing.
import type { IncomingMessage, ServerResponse } from "node:http"
import { pathOf } from "../Address.js"
import { CLIENT_CLOSED } from "../contract/StatusLine.js"
import type { MetricsService } from "./Metrics.js"
import { writeLogLine } from "./Log.js"

/** What the pipeline learned of an exchange, as far as it got. */
export interface ExchangeFacts {
  readonly namespace: string | undefined
  readonly id: string | undefined
  readonly worker: string | undefined
  readonly epoch: string | undefined
  /** An upgrade's status from the worker: 101, or what it answered instead. */
  readonly upgradeStatus: number | undefined
  /** The client's address (pipeline/ClientAddress.ts), once the request was admitted. */
  readonly client: string | undefined
}

/** Nothing learned: a request refused before the pipeline read its address. */
export const NO_FACTS: ExchangeFacts = { namespace: undefined, id: undefined, worker: undefined, epoch: undefined, upgradeStatus: undefined, client: undefined }

/** An answer Pinboard wrote itself: the catalogue error, its status, and why where the error says. */
export interface OwnAnswer {
  readonly error: string
  readonly status: number
  /** A 502's cause: `connect refused`, `header overflow`... */
  readonly reason: string | undefined
}

/** The request's span, ended by the observer (observe/Tracing.ts). */
export interface RequestSpan {
  /** `client`: the client's address (pipeline/ClientAddress.ts). */
  readonly end: (facts: ExchangeFacts, answer: OwnAnswer | undefined, status: number, client: string) => void
}

/** Records one exchange that is over; `status` is what the client was sent. */
type Record = (req: IncomingMessage, facts: ExchangeFacts, answer: OwnAnswer | undefined, status: number, seconds: number) => void

/** Records an exchange being observed, once it is over. */
export type HttpObservation = (facts: ExchangeFacts, answer: OwnAnswer | undefined) => void
export type UpgradeObservation = (facts: ExchangeFacts, answer: OwnAnswer | undefined, status: number) => void

export interface ExchangeObserver {
  /** Starts observing an HTTP exchange: recorded once the answer is in and the response closed. */
  readonly http: (req: IncomingMessage, res: ServerResponse) => HttpObservation
  /** Starts observing an upgrade: recorded when its answer is over (the tunnel open, or a status written). */
  readonly upgrade: (req: IncomingMessage) => UpgradeObservation
  /** The same observer, ending the request's span too. */
  readonly withSpan: (span: RequestSpan) => ExchangeObserver
}

/**
 * The status the client was sent, taken when the response closes: a reply written after the
 * client left never reached it (499). `then` runs once both the close and the answer are in.
 */
class ClosedStatus {
  private status: number | undefined = undefined
  private waiting: ((status: number) => void) | undefined = undefined

  constructor(res: ServerResponse) {
    res.once("close", () => {
      this.status = res.headersSent ? res.statusCode : CLIENT_CLOSED
      this.waiting?.(this.status)
    })
  }

  then(observe: (status: number) => void): void {
    if (this.status === undefined) this.waiting = observe
    else observe(this.status)
  }
}

type ClientOf = (req: IncomingMessage) => string

/** Admitted, the pipeline has the client's address already; refused before, it is read only by what records it. */
const clientIn = (clientOf: ClientOf, req: IncomingMessage, facts: ExchangeFacts) => facts.client ?? clientOf(req)

const secondsSince = (startedAt: number) => (performance.now() - startedAt) / 1000

const recording = (record: Record, clientOf: ClientOf): ExchangeObserver => ({
  http: (req, res) => {
    const startedAt = performance.now()
    const closed = new ClosedStatus(res)
    return (facts, answer) => closed.then((status) => record(req, facts, answer, status, secondsSince(startedAt)))
  },
  upgrade: (req) => {
    const startedAt = performance.now()
    return (facts, answer, status) => record(req, facts, answer, status, secondsSince(startedAt))
  },
  withSpan: (span) =>
    recording((req, facts, answer, status, seconds) => {
      span.end(facts, answer, status, clientIn(clientOf, req, facts))
      record(req, facts, answer, status, seconds)
    }, clientOf)
})

const NOTHING_RECORDED = () => undefined

const notRecording = (clientOf: ClientOf): ExchangeObserver => ({
  http: () => NOTHING_RECORDED,
  upgrade: () => NOTHING_RECORDED,
  withSpan: (span) => recording((req, facts, answer, status) => span.end(facts, answer, status, clientIn(clientOf, req, facts)), clientOf)
})

/** What is recorded of each exchange: its count and duration (`metrics`), its access line (`accessLog`). */
export interface ExchangeRecords {
  readonly metrics: boolean
  readonly accessLog: boolean
}

export const exchangeObserver = (metrics: MetricsService, records: ExchangeRecords, clientOf: ClientOf): ExchangeObserver => {
  const counted: Record = (_req, facts, answer, status, seconds) => {
    metrics.request(facts.namespace, status, seconds)
    if (answer !== undefined) metrics.error(answer.error)
  }
  // The path without its query: queries may carry secrets, and the path names the id.
  const logged: Record = (req, facts, answer, status, seconds) =>
    writeLogLine("info", "access", {
      method: req.method,
      path: pathOf(req.url ?? "/"),
      client: clientIn(clientOf, req, facts),
      namespace: facts.namespace,
      id: facts.id,
      status,
      duration_ms: Math.round(seconds * 1e6) / 1e3,
      worker: facts.worker,
      epoch: facts.epoch,
      error: answer?.error,
      reason: answer?.reason
    })
  if (records.metrics && records.accessLog) {
    return recording((req, facts, answer, status, seconds) => {
      counted(req, facts, answer, status, seconds)
      logged(req, facts, answer, status, seconds)
    }, clientOf)
  }
  if (records.metrics) return recording(counted, clientOf)
  if (records.accessLog) return recording(logged, clientOf)
  return notRecording(clientOf)
}
