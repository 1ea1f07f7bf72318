// resolve.lua's wire (docs/protocol.md "Resolution", "Cost at scale"): a batch's arguments, one
// query per argument (fields joined by "\n": no field holds one), and every reply kind in each
// mode. The view payload a reply carries is decoded by ViewWire.ts.
import type { RegistryPolicy, ResolveOutcome, ResolveQuery } from "./Domain.js"
import { payloadOf, type ViewPayload } from "./ViewWire.js"
import { numberIn, unexpected } from "./WireReply.js"

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
  `${now}\n${q.env}\n${q.namespace}\n${q.id}\n${q.hostname}\n${q.takeover}\n${mode}\n${proposal}\n${gen}\n${seq}`

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
