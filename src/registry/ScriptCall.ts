// A script on the hot path called as one prebuilt command (docs/proxy.md "Where the time
// goes"): EVALSHA by a sha worked out once, each bucket's fixed leading arguments kept in
// their wire form (RESP), only a call's own arguments encoded per call. ioredis's
// `defineCommand` encodes every argument again on each call and wraps the call in promises,
// callbacks and a pipeline of its auto-pipelining. A NOSCRIPT answer (a server flushed or
// restarted, a replica promoted) sends the same call as EVAL, which loads the script again.
// Commands go through the client's own `sendCommand`: a Cluster routes and redirects them, and
// every timeout and failure is ioredis's, as for any command.
import { Cluster, Command } from "ioredis"
import type { RedisClient, ScriptSource } from "./RedisConnection.js"

/** RESP's encoding of one argument. */
const bulk = (arg: string): string => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`

/** A bucket's leading arguments: the sha, the key count, then the fixed ones. */
interface Head {
  readonly args: ReadonlyArray<string>
  /** The wire form of the command's name and `args`: all of the command but `*<count>` and its own arguments. */
  readonly wire: string
}

/** EVALSHA whose leading arguments go out in their prebuilt wire form. */
class PrebuiltCall extends Command {
  readonly #head: Head
  constructor(head: Head, own: ReadonlyArray<string>) {
    // `args` is still the whole list, flattened from the two: ioredis routes a Cluster call by
    // its key and names the command's arguments in its errors.
    super("evalsha", [head.args, own] as unknown as Array<string>, { replyEncoding: "utf8" })
    this.#head = head
  }

  override toWritable(): string {
    const args = this.args as ReadonlyArray<string>
    let wire = `*${args.length + 1}${this.#head.wire}`
    for (let i = this.#head.args.length; i < args.length; i++) wire += bulk(args[i]!)
    return wire
  }
}

/** What of an ioredis pipeline is used here: commands made elsewhere, sent in one write. */
interface Pipeline {
  readonly sendCommand: (command: Command) => unknown
  readonly exec: () => Promise<unknown>
}

const isNoScript = (error: unknown): boolean => error instanceof Error && error.message.startsWith("NOSCRIPT")

/**
 * Calls of `script` on `client`, bucket `b`'s fixed arguments (keys first) in `heads[b]`; each
 * answers the script's reply to its bucket's arguments followed by its own.
 */
export const makeScriptCall = (client: RedisClient, script: ScriptSource, heads: ReadonlyArray<ReadonlyArray<string>>) => {
  const prebuilt = heads.map((fixed): Head => {
    const args = [script.sha, String(script.numberOfKeys), ...fixed]
    return { args, wire: `\r\n${bulk("evalsha")}${args.map(bulk).join("")}` }
  })
  const cluster = client instanceof Cluster

  // The calls made together (before the next microtask) leave in one write, as ioredis's
  // auto-pipelining sends them; a Cluster client has none (RedisConnection.ts clusterOptions).
  let queued: Array<Command> = []
  const writeQueued = () => {
    const commands = queued
    queued = []
    if (commands.length === 1) return void client.sendCommand(commands[0]!)
    const pipeline = client.pipeline() as unknown as Pipeline
    for (const command of commands) pipeline.sendCommand(command)
    // Each call answers through its own command, never through the pipeline.
    pipeline.exec().catch(() => undefined)
  }
  const send = (command: Command) => {
    if (cluster) void client.sendCommand(command)
    else if (queued.push(command) === 1) queueMicrotask(writeQueued)
  }

  /** After NOSCRIPT, the same call as EVAL: the server runs it and keeps the script for the EVALSHAs after it. */
  const evalAgain = (command: Command): Promise<unknown> => {
    const again = new Command("eval", [script.lua, ...command.args.slice(1)], { replyEncoding: "utf8" })
    void client.sendCommand(again)
    return again.promise
  }

  return (bucket: number, own: ReadonlyArray<string>): Promise<unknown> => {
    const command = new PrebuiltCall(prebuilt[bucket]!, own)
    send(command)
    return command.promise.catch((error: unknown) => {
      if (isNoScript(error)) return evalAgain(command)
      throw error
    })
  }
}
