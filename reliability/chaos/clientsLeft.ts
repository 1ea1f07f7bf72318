// Requests whose client left before Pinboard answered: with the access log on, Pinboard writes
// each as a 499 line naming the worker and epoch its forward was waiting on, so a hang in the
// audit can say where it hung.

export interface ClientLeft {
  /** The Pinboard that wrote the line. */
  readonly via: string
  readonly path: string
  readonly id: string
  /** When the request arrived (ms): the line's time less its duration. */
  readonly receivedAt: number
  readonly durationMs: number
  readonly worker: string | undefined
  readonly epoch: string | undefined
}

/** The 499 access line `line` of Pinboard `via`, if it is one. */
export const clientLeftOf = (via: string, line: string): ClientLeft | undefined => {
  // Most lines are not: skip them before parsing.
  if (!line.includes('"status":499')) return undefined
  try {
    const fields = JSON.parse(line) as Record<string, unknown>
    if (fields["message"] !== "access" || fields["status"] !== 499) return undefined
    const durationMs = Number(fields["duration_ms"])
    return {
      via,
      path: String(fields["path"]),
      id: String(fields["id"]),
      receivedAt: Date.parse(String(fields["time"])) - durationMs,
      durationMs,
      worker: typeof fields["worker"] === "string" ? fields["worker"] : undefined,
      epoch: typeof fields["epoch"] === "string" ? fields["epoch"] : undefined
    }
  } catch {
    return undefined
  }
}

/** Clocks of the client and of Pinboard's line differ by scheduling only: a line this close in time is the request's. */
const SLACK_MS = 1000

/** Where the request sent to `via` for `path` at `sentAt` hung, by the 499 line Pinboard wrote when its client left. */
export const whereHung = (request: { readonly via: string; readonly path: string; readonly sentAt: number }, lefts: ReadonlyArray<ClientLeft>): string => {
  const line = lefts.find((left) => left.via === request.via && left.path === request.path && Math.abs(left.receivedAt - request.sentAt) <= SLACK_MS)
  if (line === undefined) return `${request.via} logged no 499 for it`
  if (line.worker === undefined) return `${request.via} saw the client leave after ${line.durationMs} ms, before any worker`
  return `${request.via} saw the client leave after ${line.durationMs} ms, waiting on ${line.worker} at epoch ${line.epoch ?? "?"}`
}
