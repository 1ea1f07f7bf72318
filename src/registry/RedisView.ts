// The membership views of the Redis registry (MembershipView.ts), one per bucket: kept current
// from what each resolve answer carries (the records changed since the view's sequence number,
// and the workers short of lease at the query's `now`), and read page by page (view.lua) when
// an answer says the view is too far behind. Each page is one short script call, so no read
// holds a shard for longer than a page takes. The pages are decoded by ViewWire.ts.
import { applyUpdates, emptyView, resetView, seqAfter, type BucketView } from "./MembershipView.js"
import { decodeLogPage, decodeMembersPage, decodeShortPage, viewPageArgs, type ViewPayload } from "./ViewWire.js"

/** Records per page of view.lua. */
const PAGE = 256

/** One call of view.lua with its arguments (ViewWire.ts viewPageArgs); the raw reply. */
export type ViewRead = (bucket: number, now: number, args: ReadonlyArray<string>) => Promise<unknown>

export interface RedisViews {
  readonly view: (bucket: number) => BucketView
  /** Brings the view up to date with an answer's payload; the workers short of lease at `now`. */
  readonly absorb: (bucket: number, now: number, payload: ViewPayload) => Promise<ReadonlySet<string>>
}

export const makeRedisViews = (buckets: number, read: ViewRead, minLeaseLeftMs: number): RedisViews => {
  const views = Array.from({ length: buckets }, emptyView)
  const refreshing: Array<Promise<void> | undefined> = Array.from({ length: buckets }, () => undefined)

  /** Reads the log after the view's sequence number; false when it no longer reaches back that far. */
  const readLog = async (bucket: number, now: number, view: BucketView): Promise<boolean> => {
    for (;;) {
      const page = decodeLogPage(await read(bucket, now, viewPageArgs("log", view.seq, PAGE, minLeaseLeftMs)))
      if (page.gen !== view.gen || seqAfter(page.trim, view.seq)) return false
      applyUpdates(view, page.updates)
      if (page.last !== undefined) view.seq = page.last
      if (page.updates.length < PAGE) return true
    }
  }

  /** Reads every record afresh into a new view, then the log from where the reading began. */
  const readAll = async (bucket: number, now: number): Promise<void> => {
    const fresh = emptyView()
    let after = ""
    for (let first = true; ; first = false) {
      const page = decodeMembersPage(await read(bucket, now, viewPageArgs("members", after, PAGE, minLeaseLeftMs)))
      if (first) resetView(fresh, page.gen, page.seq)
      applyUpdates(fresh, page.updates)
      if (page.updates.length < PAGE) break
      after = page.updates[PAGE - 1]!.worker
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
      const page = decodeShortPage(await read(bucket, now, viewPageArgs("short", String(offset), PAGE, minLeaseLeftMs)))
      for (const worker of page) short.add(worker)
      if (page.length < PAGE) return short
    }
  }

  return {
    view: (bucket) => views[bucket]!,
    absorb: async (bucket, now, payload) => {
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
