// The membership views of the Redis registry (MembershipView.ts), one per bucket: kept current
// from what each resolve answer carries (the records changed since the view's sequence number,
// and the workers short of lease at the query's `now`), and read page by page (view.lua) when
// an answer says the view is too far behind. Each page is one short script call, so no read
// holds a shard for longer than a page takes.
import { applyUpdates, emptyView, resetView, seqAfter, type BucketView, type RecordUpdate, type ViewRecord } from "./MembershipView.js"
import type { NamespaceRegistration } from "./Domain.js"

/** Records per page of view.lua. */
const PAGE = 256
const RECORD_LINES = 9

export type ViewRead = (bucket: number, now: number, args: ReadonlyArray<string>) => Promise<ReadonlyArray<string>>

/** One record's lines: worker, present, memberKeys (space-separated), headroom, draining, degraded, nackStart, nackCount, ns JSON. */
const recordAt = (lines: ReadonlyArray<string>, at: number): RecordUpdate => {
  const worker = lines[at]!
  if (lines[at + 1] !== "1") return { worker, record: undefined }
  const record: ViewRecord = {
    worker,
    // One key per registration: a namespace registered for two hostnames is named twice.
    memberKeys: lines[at + 2] === "" ? [] : [...new Set(lines[at + 2]!.split(" "))],
    headroom: Number(lines[at + 3]),
    draining: lines[at + 4] === "1",
    degraded: lines[at + 5] === "1",
    nackWindowStart: Number(lines[at + 6]),
    nackCount: Number(lines[at + 7]),
    namespaces: JSON.parse(lines[at + 8]!) as ReadonlyArray<NamespaceRegistration>
  }
  return { worker, record }
}

const recordsAt = (lines: ReadonlyArray<string>, from: number, count: number): Array<RecordUpdate> =>
  Array.from({ length: count }, (_, i) => recordAt(lines, from + i * RECORD_LINES))

/** What a "choose" or "stale" answer carries after its tag (resolve.lua viewPayload). */
interface Payload {
  readonly gen: string
  readonly seq: string
  readonly state: "done" | "more" | "full"
  /** undefined: more than the answer could carry; read them page by page. */
  readonly short: ReadonlyArray<string> | undefined
  readonly updates: ReadonlyArray<RecordUpdate>
}

export const parsePayload = (lines: ReadonlyArray<string>): Payload => {
  const shortCount = Number(lines[3])
  const short = shortCount < 0 ? undefined : lines.slice(4, 4 + shortCount)
  const recordsFrom = 4 + Math.max(shortCount, 0)
  return {
    gen: lines[0]!,
    seq: lines[1]!,
    state: lines[2] as Payload["state"],
    short,
    updates: recordsAt(lines, recordsFrom + 1, Number(lines[recordsFrom]))
  }
}

export interface RedisViews {
  readonly view: (bucket: number) => BucketView
  /** Brings the view up to date with an answer's payload; the workers short of lease at `now`. */
  readonly absorb: (bucket: number, now: number, payload: ReadonlyArray<string>) => Promise<ReadonlySet<string>>
}

export const makeRedisViews = (buckets: number, read: ViewRead, minLeaseLeftMs: number): RedisViews => {
  const views = Array.from({ length: buckets }, emptyView)
  const refreshing: Array<Promise<void> | undefined> = Array.from({ length: buckets }, () => undefined)

  /** Reads the log after the view's sequence number; false when it no longer reaches back that far. */
  const readLog = async (bucket: number, now: number, view: BucketView): Promise<boolean> => {
    for (;;) {
      const page = await read(bucket, now, ["log", view.seq, String(PAGE), String(minLeaseLeftMs)])
      const [gen, , trim] = page
      if (gen !== view.gen || seqAfter(trim!, view.seq)) return false
      const bar = page.indexOf("|")
      const count = (bar - 3) / RECORD_LINES
      applyUpdates(view, recordsAt(page, 3, count))
      if (count > 0) view.seq = page[page.length - 1]!
      if (count < PAGE) return true
    }
  }

  /** Reads every record afresh into a new view, then the log from where the reading began. */
  const readAll = async (bucket: number, now: number): Promise<void> => {
    const fresh = emptyView()
    let after = ""
    for (let first = true; ; first = false) {
      const page = await read(bucket, now, ["members", after, String(PAGE), String(minLeaseLeftMs)])
      if (first) resetView(fresh, page[0]!, page[1]!)
      const count = (page.length - 3) / RECORD_LINES
      const updates = recordsAt(page, 3, count)
      applyUpdates(fresh, updates)
      if (count < PAGE) break
      after = updates[count - 1]!.worker
    }
    await readLog(bucket, now, fresh)
    views[bucket] = fresh
  }

  /** One refresh at a time per bucket; callers meanwhile wait for the running one. */
  const refresh = (bucket: number, now: number, full: boolean): Promise<void> => {
    const running = refreshing[bucket]
    if (running !== undefined) return running
    const started = (async () => {
      if (full || !(await readLog(bucket, now, views[bucket]!))) await readAll(bucket, now)
    })().finally(() => {
      refreshing[bucket] = undefined
    })
    refreshing[bucket] = started
    return started
  }

  const readShort = async (bucket: number, now: number): Promise<ReadonlySet<string>> => {
    const short = new Set<string>()
    for (let offset = 0; ; offset += PAGE) {
      const page = await read(bucket, now, ["short", String(offset), String(PAGE), String(minLeaseLeftMs)])
      for (const worker of page.slice(3)) short.add(worker)
      if (page.length - 3 < PAGE) return short
    }
  }

  return {
    view: (bucket) => views[bucket]!,
    absorb: async (bucket, now, lines) => {
      const payload = parsePayload(lines)
      const view = views[bucket]!
      if (payload.state !== "done") await refresh(bucket, now, payload.state === "full")
      else if (payload.gen === view.gen && seqAfter(payload.seq, view.seq)) {
        applyUpdates(view, payload.updates)
        view.seq = payload.seq
      }
      return payload.short === undefined ? readShort(bucket, now) : new Set(payload.short)
    }
  }
}
