// One instance exchange as the request metrics and the access log see it: the pipeline notes
// what it learns (namespace and id, then the worker and epoch it forwards to, or the error it
// answered with), and when the exchange is over one call counts it and writes its line.
import type { IncomingMessage } from "node:http"
import { pathOf } from "../Address.js"
import type { MetricsService } from "./Metrics.js"
import { writeLogLine } from "./Log.js"

export interface ExchangeNote {
  namespace?: string
  id?: string
  worker?: string
  epoch?: string
  /** The catalogue error Pinboard answered with, and that answer's status. */
  error?: string
  /** Why, where the error says (a 502's cause: `connect refused`, `header overflow`...). */
  reason?: string | undefined
  status?: number
}

export interface ExchangeObserver {
  /** Nothing to observe: the pipeline's notes go nowhere. */
  readonly idle: boolean
  /** Counts the exchange and writes its access line; `status` is what the client was sent. */
  readonly finished: (req: IncomingMessage, note: ExchangeNote, status: number, startedAt: number) => void
}

export const exchangeObserver = (metrics: MetricsService, accessLog: boolean): ExchangeObserver => ({
  idle: !metrics.enabled && !accessLog,
  finished: (req, note, status, startedAt) => {
    const seconds = (performance.now() - startedAt) / 1000
    metrics.request(note.namespace, status, seconds)
    if (note.error !== undefined) metrics.error(note.error)
    if (!accessLog) return
    // The path without its query: queries may carry secrets, and the path names the id.
    writeLogLine("info", "access", {
      method: req.method,
      path: pathOf(req.url ?? "/"),
      namespace: note.namespace,
      id: note.id,
      status,
      duration_ms: Math.round(seconds * 1e6) / 1e3,
      worker: note.worker,
      epoch: note.epoch,
      error: note.error,
      reason: note.reason
    })
  }
})
