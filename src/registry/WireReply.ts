// What every part of the registry's wire to Redis shares (docs/protocol.md "Keys of one bucket"):
// a reply as ioredis hands it over, the readers of its fields, and UnexpectedReply for a reply
// the protocol does not allow: a defect (500 internal error), never an answer. Each script's
// arguments and replies are in ResolveWire.ts, ViewWire.ts, WorkerWire.ts and PlacementWire.ts;
// the formats are written at the head of each script (scripts/*.lua). Numbers cross as decimal
// strings.
import { Data, Effect } from "effect"
import type { NamespaceRegistration } from "./Domain.js"
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

export const unexpected = (script: ScriptName, reply: unknown): never => {
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

/** A field as text: nil is "". */
export const fieldText = (value: unknown): string => (value === null || value === undefined ? "" : String(value))
export const isList = (reply: unknown): reply is ScriptReply => Array.isArray(reply)
/** A decimal field: a finite number, or the reply is malformed. */
export const numberIn = (script: ScriptName, reply: unknown, field: unknown): number => {
  const value = typeof field === "number" ? field : typeof field === "string" && field !== "" ? Number(field) : NaN
  return Number.isFinite(value) ? value : unexpected(script, reply)
}
export const namespacesIn = (script: ScriptName, reply: unknown, json: string): ReadonlyArray<NamespaceRegistration> => {
  try {
    return JSON.parse(json) as ReadonlyArray<NamespaceRegistration>
  } catch {
    return unexpected(script, reply)
  }
}

/** Redis TIME ([seconds, microseconds]) in ms, to the µs. */
export const decodeTime = (reply: ReadonlyArray<string | number>): number => Number(reply[0]) * 1000 + Number(reply[1]) / 1000
