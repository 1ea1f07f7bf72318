// The registry's wire to Redis (docs/protocol.md "Keys of one bucket"): what each Lua script
// is sent and what it answers, encoded and decoded here and nowhere else; the formats are
// written at the head of each script (scripts/*.lua). Numbers cross as decimal strings; a
// resolve query and a view payload are fields joined by "\n" (no field holds one). A reply
// the protocol does not allow is an UnexpectedReply: a defect (500 internal error), never an
// answer. One section per script or group of scripts.
import { Data, Effect } from "effect"
import type {
  BucketHeartbeat,
  CasOutcome,
  NamespaceRegistration,
  PlacementKey,
  PlacementView,
  RegisterOutcome,
  RegistryPolicy,
  ResolveOutcome,
  ResolveQuery,
  WindDownDue,
  WindDownOutcome,
  WorkerHeartbeat,
  WorkerRecord,
  WorkerRegistration
} from "./Domain.js"
import { memberKey } from "./Domain.js"
import type { RecordUpdate } from "./MembershipView.js"
import type { ScriptName } from "./RedisConnection.js"

/** A reply as ioredis hands it over: a string, an integer, nil, or an array of them. */
export type ScriptReply = ReadonlyArray<string | number | null>

/** A script answered what its protocol does not allow: a defect (500 internal error, logged). */
export class UnexpectedReply extends Data.TaggedError("UnexpectedReply")<{ readonly script: ScriptName; readonly reply: unknown }> {
  override get message(): string {
    const text = JSON.stringify(this.reply) ?? String(this.reply)
    return `${this.script}.lua answered an unexpected reply: ${text.length > 300 ? `${text.slice(0, 300)}...` : text}`
  }
}

const unexpected = (script: ScriptName, reply: unknown): never => {
  throw new UnexpectedReply({ script, reply })
}

/** The decoded reply, or the decoder's UnexpectedReply as a defect. */
export const orDefect =
  <R, A>(decode: (reply: R) => A) =>
  (reply: R): Effect.Effect<A> => {
    try {
      return Effect.succeed(decode(reply))
    } catch (defect) {
      return Effect.die(defect)
    }
  }

const flag = (value: boolean): string => (value ? "1" : "0")
const text = (value: unknown): string => (value === null || value === undefined ? "" : String(value))
const isList = (reply: unknown): reply is ScriptReply => Array.isArray(reply)
/** A decimal field: a finite number, or the reply is malformed. */
const numberIn = (script: ScriptName, reply: unknown, field: unknown): number => {
  const value = typeof field === "number" ? field : typeof field === "string" && field !== "" ? Number(field) : NaN
  return Number.isFinite(value) ? value : unexpected(script, reply)
}
const namespacesIn = (script: ScriptName, reply: unknown, json: string): ReadonlyArray<NamespaceRegistration> => {
  try {
    return JSON.parse(json) as ReadonlyArray<NamespaceRegistration>
  } catch {
    return unexpected(script, reply)
  }
}

// resolve.lua ------------------------------------------------------------------------------

/** How far a resolve query has got (resolve.lua placeNew's mode). */
export const ResolveMode = {
  /** The first call: a placed id is served; a new one answers what the view lacks. */
  ask: "a",
  /** The view's proposal ("" when it has no candidate); a refused one answers what the view missed. */
  propose: "p",
  /** The proposal ranked once more; a refused one answers no live backends. */
  lastProposal: "f"
} as const
export type ResolveMode = (typeof ResolveMode)[keyof typeof ResolveMode]

/** A resolve batch's arguments after its keys: now (unused, each query has its own) and the policy. */
export const resolvePolicyArgs = (policy: RegistryPolicy, minLeaseLeftMs: number): ReadonlyArray<string> => [
  "0",
  String(policy.leaseMs),
  String(minLeaseLeftMs),
  String(policy.nackThreshold),
  String(policy.nackWindowMs)
]

/** One resolve query as one script argument; `gen` and `seq` are the bucket view's. */
export const encodeResolveQuery = (now: number, q: ResolveQuery, mode: ResolveMode, proposal: string, gen: string, seq: string): string =>
  `${now}\n${q.env}\n${q.namespace}\n${q.id}\n${q.hostname}\n${q.takeover ?? ""}\n${mode}\n${proposal}\n${gen}\n${seq}`

/** "again": the same id's placement began earlier in this batch; ask once it is done. */
export interface AskAgain {
  readonly _tag: "AskAgain"
}
/** "choose": a new id; the script wants the view's proposal, and sends what the view lacks. */
export interface ProposalWanted {
  readonly _tag: "ProposalWanted"
  readonly view: ViewPayload
}
/** "stale": the proposal is no candidate at now; with what the view missed. */
export interface ProposalRefused {
  readonly _tag: "ProposalRefused"
  readonly view: ViewPayload
}

export type AskReply = ResolveOutcome | AskAgain | ProposalWanted
export type ProposalReply = ResolveOutcome | ProposalRefused
export type LastProposalReply = ResolveOutcome

/** "cold", "takeover", "displaced": the kind, then the time left in ms. */
const retryAfterIn = (reply: string, fields: ReadonlyArray<string>): number =>
  fields.length === 2 ? numberIn("resolve", reply, fields[1]) : unexpected("resolve", reply)

/** Every reply kind of resolve.lua, in whichever mode. */
const decodeResolveReply = (reply: unknown): AskReply | ProposalReply => {
  if (typeof reply !== "string") return unexpected("resolve", reply)
  const fields = reply.split("\n")
  switch (fields[0]) {
    case "placed":
      if (fields.length !== 5 || (fields[4] !== "0" && fields[4] !== "1")) return unexpected("resolve", reply)
      return { _tag: "Placed", worker: fields[1]!, advertiseUrl: fields[2]!, epoch: fields[3]!, isNew: fields[4] === "1" }
    case "unknown":
      return fields.length === 1 ? { _tag: "UnknownNamespace" } : unexpected("resolve", reply)
    case "none":
      return fields.length === 1 ? { _tag: "NoLiveBackends" } : unexpected("resolve", reply)
    case "cold":
      return { _tag: "ColdStart", retryAfterMs: retryAfterIn(reply, fields) }
    case "rebound":
      return fields.length === 2 ? { _tag: "Rebound", env: fields[1]! } : unexpected("resolve", reply)
    case "held":
      return fields.length === 1 ? { _tag: "HeldByAnotherHostname" } : unexpected("resolve", reply)
    case "takeover":
      return { _tag: "TakeoverInProgress", retryAfterMs: retryAfterIn(reply, fields) }
    case "displaced":
      return { _tag: "Displaced", retryAfterMs: retryAfterIn(reply, fields) }
    case "again":
      return fields.length === 1 ? { _tag: "AskAgain" } : unexpected("resolve", reply)
    case "choose":
      return { _tag: "ProposalWanted", view: payloadOf(reply, fields) }
    case "stale":
      return { _tag: "ProposalRefused", view: payloadOf(reply, fields) }
    default:
      return unexpected("resolve", reply)
  }
}

/** The reply to a query in mode `ask`. */
export const decodeAskReply = (reply: unknown): AskReply => {
  const decoded = decodeResolveReply(reply)
  return decoded._tag === "ProposalRefused" ? unexpected("resolve", reply) : decoded
}

/** The reply to a query in mode `propose`. */
export const decodeProposalReply = (reply: unknown): ProposalReply => {
  const decoded = decodeResolveReply(reply)
  return decoded._tag === "AskAgain" || decoded._tag === "ProposalWanted" ? unexpected("resolve", reply) : decoded
}

/** The reply to a query in mode `lastProposal`: an outcome, a refusal being no live backends. */
export const decodeLastProposalReply = (reply: unknown): LastProposalReply => {
  const decoded = decodeProposalReply(reply)
  return decoded._tag === "ProposalRefused" ? unexpected("resolve", reply) : decoded
}

// The membership view's records, and the payload of "choose" and "stale" (viewPayload) ------

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

/** The payload lines after a reply's kind: gen, seq, state, short count, short..., record count, records. */
const payloadOf = (reply: string, lines: ReadonlyArray<string>): ViewPayload => {
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

// fleet.lua: one entry per membership write, one reply per entry --------------------------

export const encodeRegisterEntry = (now: number, r: WorkerRegistration, leaseMs: number): ReadonlyArray<string> => [
  "r",
  String(now),
  r.worker,
  r.incarnation,
  r.advertiseUrl,
  String(now + leaseMs),
  String(r.headroom),
  flag(r.draining),
  JSON.stringify(r.namespaces),
  r.namespaces.map((n) => memberKey(n.env, n.namespace)).join("\n"),
  r.epoch ?? "0",
  r.namespaces.flatMap((n) => (n.hostname === "" ? [] : [`${n.hostname}|${n.namespace}|${n.env}`])).join("\n")
]

export const encodeHeartbeatEntry = (now: number, beat: WorkerHeartbeat, leaseMs: number): ReadonlyArray<string> => [
  "h",
  String(now),
  beat.worker,
  beat.incarnation,
  String(now + leaseMs),
  String(beat.headroom),
  flag(beat.draining),
  flag(beat.degraded)
]

export const encodeDeregisterEntry = (now: number, worker: string, incarnation: string): ReadonlyArray<string> => ["d", String(now), worker, incarnation]

export const encodeNackEntry = (now: number, worker: string, nackWindowMs: number): ReadonlyArray<string> => ["n", String(now), worker, String(nackWindowMs)]

export const decodeRegisterReply = (reply: unknown): RegisterOutcome =>
  reply === "OK" ? { _tag: "Registered" } : reply === "conflict" ? { _tag: "BindingConflict" } : unexpected("fleet", reply)

/** Deregister and nack answer "OK" whatever they found. */
export const decodeDoneReply = (reply: unknown): void => {
  if (reply !== "OK") unexpected("fleet", reply)
}

/** Fields per wind-down entry of a heartbeat reply: env, namespace, id, epoch, deadline. */
const WIND_DOWN_FIELDS = 5

export const decodeHeartbeatReply = (reply: unknown): BucketHeartbeat => {
  if (!isList(reply)) return unexpected("fleet", reply)
  if (reply[0] === "lost" && reply.length === 1) return { _tag: "LeaseLost" }
  if (reply[0] !== "renewed" || (reply.length - 1) % WIND_DOWN_FIELDS !== 0) return unexpected("fleet", reply)
  const windDown: Array<WindDownDue> = []
  for (let i = 1; i < reply.length; i += WIND_DOWN_FIELDS) {
    windDown.push({
      env: text(reply[i]),
      namespace: text(reply[i + 1]),
      id: text(reply[i + 2]),
      epoch: text(reply[i + 3]),
      deadline: numberIn("fleet", reply, reply[i + 4])
    })
  }
  return { _tag: "Renewed", windDown }
}

// workers.lua, held.lua: reads for the API and the fleet page -----------------------------

export const workersArgs = (after: string, limit: number): ReadonlyArray<string> => [after, String(limit)]

/** A worker record as workers.lua reads it: all but its incarnation. */
export type WorkerRow = Omit<WorkerRecord, "incarnation">

/** Fields per row of workers.lua: worker, url, ns, headroom, lease, draining, degraded, nackStart, nackCount. */
const WORKER_FIELDS = 9

export const decodeWorkersReply = (reply: unknown): ReadonlyArray<WorkerRow> => {
  if (!isList(reply)) return unexpected("workers", reply)
  return reply.map((row: unknown) => {
    if (!isList(row) || row.length !== WORKER_FIELDS) return unexpected("workers", reply)
    const [worker, url, namespaces, headroom, lease, draining, degraded, nackStart, nackCount] = row.map(text)
    return {
      worker: worker!,
      advertiseUrl: url!,
      namespaces: namespacesIn("workers", reply, namespaces!),
      headroom: numberIn("workers", reply, headroom),
      leaseExpiresAt: numberIn("workers", reply, lease),
      draining: draining === "1",
      degraded: degraded === "1",
      nackWindowStart: numberIn("workers", reply, nackStart),
      nackCount: numberIn("workers", reply, nackCount)
    }
  })
}

/** How many rows of the bucket name each worker asked for, in their order. */
export const decodeHeldReply =
  (workers: number) =>
  (reply: unknown): ReadonlyArray<number> =>
    isList(reply) && reply.length === workers && reply.every((count) => typeof count === "number") ? (reply as ReadonlyArray<number>) : unexpected("held", reply)

// release.lua, tag.lua, winddown.lua, placement.lua: one row ------------------------------

const keyArgs = (key: PlacementKey): ReadonlyArray<string> => [key.env, key.namespace, key.id]

export const releaseArgs = (key: PlacementKey, epoch: string): ReadonlyArray<string> => [...keyArgs(key), epoch]
export const tagArgs = (key: PlacementKey, epoch: string, tag: string): ReadonlyArray<string> => [...keyArgs(key), epoch, tag]
export const windDownArgs = (key: PlacementKey, epoch: string, deadline: number): ReadonlyArray<string> => [...keyArgs(key), epoch, String(deadline)]
export const placementArgs = keyArgs

/** {"conflict", current?}: the row's epoch, or none. */
const conflictOf = (script: ScriptName, reply: ScriptReply): { readonly _tag: "Conflict"; readonly current: string | null } =>
  reply.length === 1 || (reply.length === 2 && typeof reply[1] === "string")
    ? { _tag: "Conflict", current: reply.length === 2 ? (reply[1] as string) : null }
    : unexpected(script, reply)

/** release.lua and tag.lua: {"done"} or {"conflict", current?}. */
export const decodeCasReply =
  (script: "release" | "tag") =>
  (reply: unknown): CasOutcome => {
    if (!isList(reply)) return unexpected(script, reply)
    if (reply[0] === "done" && reply.length === 1) return { _tag: "Done" }
    return reply[0] === "conflict" ? conflictOf(script, reply) : unexpected(script, reply)
  }

export const decodeWindDownReply = (reply: unknown): WindDownOutcome => {
  if (!isList(reply)) return unexpected("winddown", reply)
  if (reply[0] === "winding" && reply.length === 2) return { _tag: "WindingDown", deadline: numberIn("winddown", reply, reply[1]) }
  return reply[0] === "conflict" ? conflictOf("winddown", reply) : unexpected("winddown", reply)
}

/** Fields of placement.lua's reply: worker, incarnation, epoch, placedAt, hostname, tag, windDownAt, url, live. */
const PLACEMENT_FIELDS = 9

export const decodePlacementReply =
  (key: PlacementKey) =>
  (reply: unknown): PlacementView | undefined => {
    if (!isList(reply) || (reply.length !== 0 && reply.length !== PLACEMENT_FIELDS)) return unexpected("placement", reply)
    if (reply.length === 0) return undefined
    const [worker, incarnation, epoch, placedAt, hostname, tag, windDownAt, url, live] = reply.map(text)
    return {
      ...key,
      worker: worker!,
      incarnation: incarnation!,
      epoch: epoch!,
      placedAt: numberIn("placement", reply, placedAt),
      hostname: hostname!,
      tag: tag!,
      windDownAt: numberIn("placement", reply, windDownAt),
      advertiseUrl: url === "" ? null : url!,
      live: live === "1"
    }
  }

// sweep.lua -------------------------------------------------------------------------------

export const sweepArgs = (leaseMs: number): ReadonlyArray<string> => [String(leaseMs)]

/** Whether the bucket's sweep has more to do than one slice. */
export const decodeSweepReply = (reply: unknown): boolean => (reply === "more" ? true : reply === "done" ? false : unexpected("sweep", reply))

// TIME -------------------------------------------------------------------------------------

/** Redis TIME ([seconds, microseconds]) in ms, to the µs. */
export const decodeTime = (reply: ReadonlyArray<string | number>): number => Number(reply[0]) * 1000 + Number(reply[1]) / 1000
