// The placement rows' wire (docs/registry-api.md, "Ended rows and the sweep" among them):
// release.lua, tag.lua, winddown.lua and placement.lua, each on one row, and sweep.lua, which
// ends the rows of a bucket slice by slice.
import type { CallerPlacement, CasOutcome, OwnerGrant, PlacementKey, PlacementView, WindDownOutcome } from "./Domain.js"
import type { ScriptName } from "./RedisConnection.js"
import { fieldText, isList, numberIn, unexpected, type ScriptReply } from "./WireReply.js"

// release.lua, tag.lua, winddown.lua, placement.lua: one row ------------------------------

const keyArgs = (key: PlacementKey): ReadonlyArray<string> => [key.env, key.namespace, key.id]

/** An owner grant as release.lua and tag.lua take it last: the count of exact ids, them, the prefixes; none, nothing. */
const grantArgs = (owners: OwnerGrant | undefined): ReadonlyArray<string> =>
  owners === undefined ? [] : [String(owners.exact.length), ...owners.exact, ...owners.prefixes]

export const releaseArgs = (key: PlacementKey, epoch: string, owners?: OwnerGrant): ReadonlyArray<string> => [...keyArgs(key), epoch, ...grantArgs(owners)]
export const tagArgs = (key: PlacementKey, epoch: string, tag: string, owners?: OwnerGrant): ReadonlyArray<string> => [
  ...keyArgs(key),
  epoch,
  tag,
  ...grantArgs(owners)
]
export const windDownArgs = (key: PlacementKey, epoch: string, deadline: number): ReadonlyArray<string> => [...keyArgs(key), epoch, String(deadline)]
export const placementArgs = keyArgs
export const callerPlacementArgs = (key: PlacementKey, worker: string): ReadonlyArray<string> => [...keyArgs(key), worker]

/** {"conflict", current?}: the row's epoch, or none. */
const conflictOf = (script: ScriptName, reply: ScriptReply): { readonly _tag: "Conflict"; readonly current: string | null } =>
  reply.length === 1 || (reply.length === 2 && typeof reply[1] === "string")
    ? { _tag: "Conflict", current: reply.length === 2 ? (reply[1] as string) : null }
    : unexpected(script, reply)

/** release.lua and tag.lua: {"done"}, {"conflict", current?} or {"held"}. */
export const decodeCasReply =
  (script: "release" | "tag") =>
  (reply: unknown): CasOutcome => {
    if (!isList(reply)) return unexpected(script, reply)
    if (reply[0] === "done" && reply.length === 1) return { _tag: "Done" }
    if (reply[0] === "held" && reply.length === 1) return { _tag: "HeldByAnotherWorker" }
    return reply[0] === "conflict" ? conflictOf(script, reply) : unexpected(script, reply)
  }

export const decodeWindDownReply = (reply: unknown): WindDownOutcome => {
  if (!isList(reply)) return unexpected("winddown", reply)
  if (reply[0] === "winding" && reply.length === 2) return { _tag: "WindingDown", deadline: numberIn("winddown", reply, reply[1]) }
  return reply[0] === "conflict" ? conflictOf("winddown", reply) : unexpected("winddown", reply)
}

/** Fields of placement.lua's reply: worker, incarnation, epoch, placedAt, hostname, tag, windDownAt, url, live. */
const PLACEMENT_FIELDS = 9

/** A row's fields as placement.lua answers them, within `reply` (what a malformed one is reported as). */
const placementIn = (key: PlacementKey, fields: unknown, reply: unknown): PlacementView | undefined => {
  if (!isList(fields) || (fields.length !== 0 && fields.length !== PLACEMENT_FIELDS)) return unexpected("placement", reply)
  if (fields.length === 0) return undefined
  const [worker, incarnation, epoch, placedAt, hostname, tag, windDownAt, url, live] = fields.map(fieldText)
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

export const decodePlacementReply =
  (key: PlacementKey) =>
  (reply: unknown): PlacementView | undefined =>
    placementIn(key, reply, reply)

/** placement.lua asked with a worker: {the row's fields or {}, {incarnation, callerKey} or {}}. */
export const decodeCallerPlacementReply =
  (key: PlacementKey) =>
  (reply: unknown): CallerPlacement => {
    if (!isList(reply) || reply.length !== 2) return unexpected("placement", reply)
    const [fields, caller] = reply
    const known = isList(caller) && caller.every((field) => typeof field === "string" && field !== "")
    if (!known || (caller.length !== 0 && caller.length !== 2)) return unexpected("placement", reply)
    const [incarnation, callerKey] = caller as ReadonlyArray<string>
    return { placement: placementIn(key, fields, reply), caller: caller.length === 0 ? undefined : { incarnation: incarnation!, callerKey: callerKey! } }
  }

// sweep.lua -------------------------------------------------------------------------------

export const sweepArgs = (leaseMs: number): ReadonlyArray<string> => [String(leaseMs)]

/** Whether the bucket's sweep has more to do than one slice. */
export const decodeSweepReply = (reply: unknown): boolean => (reply === "more" ? true : reply === "done" ? false : unexpected("sweep", reply))
