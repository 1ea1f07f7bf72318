// One instance exchange as its observers see it: the facts the pipeline returns (namespace and
// id, the worker and epoch it forwarded to), the answer Pinboard wrote itself if it did, and
// the status the client was sent. Once the exchange is over, one call counts it, writes its
// access line and ends its span.
import type { IncomingMessage } from "node:http"
import { pathOf } from "../Address.js"
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

/** A request that is not traced. */
export const NO_SPAN: RequestSpan = { end: () => undefined }

export interface ExchangeObserver {
  /** Nothing to observe: no metrics, no access log (the span, when there is one, still ends). */
  readonly idle: boolean
  /** Counts the exchange, writes its access line and ends its span; `status` is what the client was sent. */
  readonly finished: (
    req: IncomingMessage,
    facts: ExchangeFacts,
    answer: OwnAnswer | undefined,
    status: number,
    startedAt: number,
    span: RequestSpan
  ) => void
}

export const exchangeObserver = (metrics: MetricsService, accessLog: boolean, clientOf: (req: IncomingMessage) => string): ExchangeObserver => ({
  idle: !metrics.enabled && !accessLog,
  finished: (req, facts, answer, status, startedAt, span) => {
    // Admitted, the pipeline has it already; refused before, it is read only when something records it.
    const client = facts.client ?? (span === NO_SPAN && !accessLog ? "" : clientOf(req))
    span.end(facts, answer, status, client)
    const seconds = (performance.now() - startedAt) / 1000
    metrics.request(facts.namespace, status, seconds)
    if (answer !== undefined) metrics.error(answer.error)
    if (!accessLog) return
    // The path without its query: queries may carry secrets, and the path names the id.
    writeLogLine("info", "access", {
      method: req.method,
      path: pathOf(req.url ?? "/"),
      client,
      namespace: facts.namespace,
      id: facts.id,
      status,
      duration_ms: Math.round(seconds * 1e6) / 1e3,
      worker: facts.worker,
      epoch: facts.epoch,
      error: answer?.error,
      reason: answer?.reason
    })
  }
})
