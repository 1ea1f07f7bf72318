// Epoch-fenced durable state for instances (docs/worker.md). Fencing is only real where storage
// checks it: an activation that lost its id may still be running, so every write and delete
// presents the writer's placement epoch, and one Lua script refuses it when the key already
// holds a newer epoch. The new owner's data cannot be overwritten by the old one.
import { assertEpoch } from "../contract/Epochs.js"

/** A write or delete presented an epoch older than the one the key already holds. */
export class StaleEpochError extends Error {
  override readonly name = "StaleEpochError"
  constructor(
    readonly key: string,
    readonly presented: string,
    readonly stored: string
  ) {
    super(`stale epoch for key ${JSON.stringify(key)}: presented ${presented}, stored ${stored}`)
  }
}

// KEYS[1]: the key's hash {epoch, value}. ARGV: presented epoch, "write" | "delete" | "claim", value.
// Epochs stay strings (they pass 2^53; see Epochs.ts): longer is newer, then lexical order.
// A delete removes the value but keeps (and advances) the epoch, so the fence survives it.
// A claim advances the epoch alone and answers the value: from then on, older owners are out.
const FENCED_SCRIPT = `
local presented = ARGV[1]
local stored = redis.call("HGET", KEYS[1], "epoch")
if stored and (#presented < #stored or (#presented == #stored and presented < stored)) then
  return {"stale", stored}
end
if ARGV[2] == "write" then
  redis.call("HSET", KEYS[1], "epoch", presented, "value", ARGV[3])
elseif ARGV[2] == "claim" then
  redis.call("HSET", KEYS[1], "epoch", presented)
  return {"ok", redis.call("HGET", KEYS[1], "value")}
else
  redis.call("HDEL", KEYS[1], "value")
  redis.call("HSET", KEYS[1], "epoch", presented)
end
return {"ok"}
`

const COMMAND = "pinboardFencedWrite"
type StoreOp = "write" | "delete" | "claim"
type FencedCommand = (key: string, epoch: string, op: StoreOp, value: string | Buffer) => Promise<[Buffer, (Buffer | null)?]>

/**
 * What the store uses of an ioredis 5 client, `Redis` or `Cluster`. Typed by shape, not as
 * ioredis's classes, so that a client made by the application's own copy of ioredis fits
 * whichever copy Pinboard's package has beside it (docs/worker.md "Durable state").
 */
export interface FencedStoreClient {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void
  hmgetBuffer(key: string, ...fields: Array<string>): Promise<Array<Buffer | null>>
}

export interface FencedStoreOptions {
  /** Key prefix; a key is stored at `${prefix}:{${key}}`. Default `"pbf"`. */
  readonly prefix?: string
}

export class FencedStore {
  private readonly prefix: string
  private readonly fenced: FencedCommand

  constructor(
    private readonly redis: FencedStoreClient,
    options: FencedStoreOptions = {}
  ) {
    this.prefix = options.prefix ?? "pbf"
    // ioredis calls a defined command by sha (EVALSHA) and loads it again on NOSCRIPT.
    redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: FENCED_SCRIPT })
    // The Buffer variant answers bytes: a claimed value comes back as stored.
    const command = (redis as unknown as Record<string, FencedCommand>)[`${COMMAND}Buffer`]!
    this.fenced = command.bind(redis)
  }

  /** Stores `value` at `key` unless the key holds a newer epoch (then StaleEpochError). */
  async write(key: string, value: string | Buffer, epoch: string): Promise<void> {
    assertEpoch(epoch)
    await this.run(key, epoch, "write", value)
  }

  /** The value and the epoch that wrote it; undefined if never written or deleted. */
  async read(key: string): Promise<{ value: Buffer; epoch: string } | undefined> {
    const [epoch, value] = await this.redis.hmgetBuffer(this.redisKey(key), "epoch", "value")
    if (epoch == null || value == null) return undefined
    return { value, epoch: epoch.toString() }
  }

  /**
   * Takes the key for `epoch`, fenced like write: older owners can write no more, and the
   * current value (undefined if none) is what the new owner starts from. Call it when an
   * activation starts, before reading its state, so no write of the old owner lands after
   * the read.
   */
  async claim(key: string, epoch: string): Promise<Buffer | undefined> {
    assertEpoch(epoch)
    return (await this.run(key, epoch, "claim")) ?? undefined
  }

  /** Deletes the value, fenced like write; the epoch stays so older owners remain fenced out. */
  async delete(key: string, epoch: string): Promise<void> {
    assertEpoch(epoch)
    await this.run(key, epoch, "delete")
  }

  /** Runs the script; a claim's value comes back. */
  private async run(key: string, epoch: string, op: StoreOp, value?: string | Buffer): Promise<Buffer | null | undefined> {
    const [outcome, answer] = await this.fenced(this.redisKey(key), epoch, op, value ?? "")
    if (outcome.toString() === "stale") throw new StaleEpochError(key, epoch, answer!.toString())
    return answer
  }

  /** Hash-tagged on the caller's key: on a Cluster the slot follows the key, not the prefix. */
  private redisKey(key: string): string {
    return `${this.prefix}:{${key}}`
  }
}
