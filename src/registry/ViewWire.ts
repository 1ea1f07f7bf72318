// The membership view's wire (docs/protocol.md "Cost at scale"): the worker records a view is
// kept current with, as resolve.lua's "choose" and "stale" replies carry them (viewPayload) and
// as view.lua reads them page by page (the log, the members, the workers short of lease).
import type { RecordUpdate } from "./MembershipView.js"
import type { ScriptName } from "./RedisConnection.js"
import { isList, namespacesIn, numberIn, unexpected } from "./WireReply.js"

/** What a "choose" or "stale" reply carries after its kind (resolve.lua viewPayload). */
export interface ViewPayload {
  readonly gen: string
  readonly seq: string
  /** "done": the records changed since the view's seq; "more": too many, read the log; "full": read the bucket afresh. */
  readonly state: "done" | "more" | "full"
  /** The workers short of lease at the query's now; undefined: more than a reply carries, read them page by page. */
  readonly short: ReadonlyArray<string> | undefined
  readonly updates: ReadonlyArray<RecordUpdate>
}

/** Record lines per worker in a view payload or page: worker, present, memberKeys, headroom, draining, degraded, nackStart, nackCount, ns. */
const RECORD_LINES = 9

const recordAt = (script: ScriptName, reply: unknown, lines: ReadonlyArray<string>, at: number): RecordUpdate => {
  const worker = lines[at]!
  if (lines[at + 1] !== "1") return lines[at + 1] === "0" ? { worker, record: undefined } : unexpected(script, reply)
  return {
    worker,
    record: {
      worker,
      // One key per registration: a namespace registered for two hostnames is named twice.
      memberKeys: lines[at + 2] === "" ? [] : [...new Set(lines[at + 2]!.split(" "))],
      headroom: numberIn(script, reply, lines[at + 3]),
      draining: lines[at + 4] === "1",
      degraded: lines[at + 5] === "1",
      nackWindowStart: numberIn(script, reply, lines[at + 6]),
      nackCount: numberIn(script, reply, lines[at + 7]),
      namespaces: namespacesIn(script, reply, lines[at + 8]!)
    }
  }
}

const recordsAt = (script: ScriptName, reply: unknown, lines: ReadonlyArray<string>, from: number, count: number): Array<RecordUpdate> => {
  if (!Number.isInteger(count) || count < 0 || from + count * RECORD_LINES > lines.length) return unexpected(script, reply)
  return Array.from({ length: count }, (_, i) => recordAt(script, reply, lines, from + i * RECORD_LINES))
}

const viewStates: ReadonlySet<string> = new Set(["done", "more", "full"])

/** The payload lines after a resolve reply's kind: gen, seq, state, short count, short..., record count, records. */
export const payloadOf = (reply: string, lines: ReadonlyArray<string>): ViewPayload => {
  const state = lines[3]
  const shortCount = numberIn("resolve", reply, lines[4])
  if (state === undefined || !viewStates.has(state) || !Number.isInteger(shortCount) || shortCount < -1) return unexpected("resolve", reply)
  const recordsFrom = 5 + Math.max(shortCount, 0)
  const recordCount = numberIn("resolve", reply, lines[recordsFrom])
  if (recordsFrom + 1 + recordCount * RECORD_LINES !== lines.length) return unexpected("resolve", reply)
  return {
    gen: lines[1]!,
    seq: lines[2]!,
    state: state as ViewPayload["state"],
    short: shortCount < 0 ? undefined : lines.slice(5, 5 + shortCount),
    updates: recordsAt("resolve", reply, lines, recordsFrom + 1, recordCount)
  }
}

// view.lua: a membership view's pages ------------------------------------------------------

export type ViewPageKind = "log" | "members" | "short"

/** One page of view.lua: its kind, where it starts (a sequence number, a worker id, an offset), its length. */
export const viewPageArgs = (kind: ViewPageKind, from: string, limit: number, minLeaseLeftMs: number): ReadonlyArray<string> => [
  kind,
  from,
  String(limit),
  String(minLeaseLeftMs)
]

/** The header of every page: the bucket's generation, its log's end and the highest sequence number trimmed. */
export interface ViewPageHeader {
  readonly gen: string
  readonly seq: string
  readonly trim: string
}

const HEADER_LINES = 3

const headerOf = (reply: unknown): ReadonlyArray<string> => {
  if (!isList(reply) || reply.length < HEADER_LINES || !reply.every((line) => typeof line === "string")) return unexpected("view", reply)
  return reply as ReadonlyArray<string>
}

export interface LogPage extends ViewPageHeader {
  /** The records changed after the page's start, in log order. */
  readonly updates: ReadonlyArray<RecordUpdate>
  /** The sequence number of the last record read; undefined when none. */
  readonly last: string | undefined
}

/** {gen, seq, trim, records..., "|", one sequence number per record}. */
export const decodeLogPage = (reply: unknown): LogPage => {
  const lines = headerOf(reply)
  const bar = lines.indexOf("|", HEADER_LINES)
  const count = (bar - HEADER_LINES) / RECORD_LINES
  if (bar < 0 || lines.length - bar - 1 !== count) return unexpected("view", reply)
  return { gen: lines[0]!, seq: lines[1]!, trim: lines[2]!, updates: recordsAt("view", reply, lines, HEADER_LINES, count), last: count > 0 ? lines[bar + count] : undefined }
}

export interface MembersPage extends ViewPageHeader {
  /** The records of the workers after the page's start, in worker id order. */
  readonly updates: ReadonlyArray<RecordUpdate>
}

export const decodeMembersPage = (reply: unknown): MembersPage => {
  const lines = headerOf(reply)
  return { gen: lines[0]!, seq: lines[1]!, trim: lines[2]!, updates: recordsAt("view", reply, lines, HEADER_LINES, (lines.length - HEADER_LINES) / RECORD_LINES) }
}

/** The workers short of lease at now, from the page's offset. */
export const decodeShortPage = (reply: unknown): ReadonlyArray<string> => headerOf(reply).slice(HEADER_LINES)
