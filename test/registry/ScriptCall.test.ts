// A script called as one prebuilt command (src/registry/ScriptCall.ts): the same bytes on the
// wire as ioredis's own encoding, the calls made together in one write, and NOSCRIPT (a script
// cache flushed, as a restart or a promoted replica leaves it) answered by EVAL once, on one
// server and on a Cluster; any other error is the call's.
import { createHash } from "node:crypto"
import keySlot from "cluster-key-slot"
import { Command, type Redis } from "ioredis"
import { describe, expect, it } from "vitest"
import type { RedisClient, ScriptSource } from "../../src/registry/RedisConnection.js"
import { makeScriptCall } from "../../src/registry/ScriptCall.js"
import { useRedis, useRedisCluster } from "../support/RedisBackend.js"

const sourceOf = (lua: string): ScriptSource => ({ lua, sha: createHash("sha1").update(lua).digest("hex"), numberOfKeys: 1 })
/** Answers its key and every argument, so a reply shows what the script was sent. */
const ECHO = sourceOf("local out = { KEYS[1] } for i = 1, #ARGV do out[#out + 1] = ARGV[i] end return out")
const heads = (prefix: string, buckets: number) => Array.from({ length: buckets }, (_, b) => [`{${prefix}:${b}}:cold`, `{${prefix}:${b}}`, "0", "15000"])

/** A client that records what it is asked to send, and answers nothing. */
const recordingClient = () => {
  const sent: Array<Command> = []
  const pipelines: Array<Array<Command>> = []
  const client = {
    sendCommand: (command: Command) => void sent.push(command),
    pipeline: () => {
      const commands: Array<Command> = []
      pipelines.push(commands)
      return { sendCommand: (command: Command) => void commands.push(command), exec: () => Promise.resolve([]) }
    }
  }
  return { client: client as unknown as RedisClient, sent, pipelines }
}

const evalCalls = async (client: Redis, command: "eval" | "evalsha"): Promise<number> =>
  Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, "m").exec(await client.info("commandstats"))?.[1] ?? 0)

describe("a prebuilt script call", () => {
  it("goes on the wire as ioredis encodes the same command, multi-byte arguments included", async () => {
    const { client, sent } = recordingClient()
    const call = makeScriptCall(client, ECHO, [["{p:0}:cold", "{p:0}", "é€", ""]])
    void call(0, ["1\nq\nü", "", "x".repeat(300)])
    await Promise.resolve()
    const command = sent[0]!
    expect(command.name).toBe("evalsha")
    expect(command.args).toEqual([ECHO.sha, "1", "{p:0}:cold", "{p:0}", "é€", "", "1\nq\nü", "", "x".repeat(300)])
    expect(command.toWritable({})).toBe(new Command("evalsha", command.args).toWritable({}))
  })

  it("leaves with the calls made together in one pipeline, and alone when it is the only one", async () => {
    const { client, sent, pipelines } = recordingClient()
    const call = makeScriptCall(client, ECHO, heads("p", 4))
    void call(2, ["a"])
    await Promise.resolve()
    expect(sent.map((c) => c.args.at(-1))).toEqual(["a"])
    void call(0, ["b"])
    void call(3, ["c"])
    void call(0, ["d"])
    await Promise.resolve()
    expect(sent).toHaveLength(1)
    expect(pipelines.map((commands) => commands.map((c) => c.args.at(-1)))).toEqual([["b", "c", "d"]])
  })
})

describe("prebuilt script calls on one redis-server", () => {
  const redis = useRedis()

  it("answer the script's reply to the bucket's arguments and the call's own, each call its own", async () => {
    const call = makeScriptCall(redis.client, ECHO, heads("one", 2))
    const [first, second] = await Promise.all([call(0, ["q1", "q2"]), call(1, [])])
    expect(first).toEqual(["{one:0}:cold", "{one:0}", "0", "15000", "q1", "q2"])
    expect(second).toEqual(["{one:1}:cold", "{one:1}", "0", "15000"])
  })

  it("answer after SCRIPT FLUSH: the calls that met NOSCRIPT go again as EVAL, and the next ones by sha", async () => {
    const call = makeScriptCall(redis.client, ECHO, heads("flush", 2))
    await call(0, ["warm"])
    await redis.client.script("FLUSH")
    const evals = await evalCalls(redis.client, "eval")
    expect(await Promise.all([call(0, ["a"]), call(1, ["b"])])).toEqual([
      ["{flush:0}:cold", "{flush:0}", "0", "15000", "a"],
      ["{flush:1}:cold", "{flush:1}", "0", "15000", "b"]
    ])
    expect(await evalCalls(redis.client, "eval")).toBe(evals + 2)
    const shas = await evalCalls(redis.client, "evalsha")
    expect(await call(1, ["c"])).toEqual(["{flush:1}:cold", "{flush:1}", "0", "15000", "c"])
    expect(await evalCalls(redis.client, "eval")).toBe(evals + 2)
    expect(await evalCalls(redis.client, "evalsha")).toBe(shas + 1)
  })

  it("fail with the script's own error, never sent again as EVAL", async () => {
    const broken = sourceOf(`return redis.error_reply("BROKEN " .. KEYS[1])`)
    await redis.client.script("LOAD", broken.lua)
    const call = makeScriptCall(redis.client, broken, heads("err", 1))
    const evals = await evalCalls(redis.client, "eval")
    await expect(call(0, [])).rejects.toThrow("BROKEN {err:0}:cold")
    expect(await evalCalls(redis.client, "eval")).toBe(evals)
  })
})

describe("prebuilt script calls on a Redis Cluster", () => {
  const live = useRedisCluster()

  it("reach every bucket's shard, and answer after SCRIPT FLUSH on every master", async () => {
    const buckets = 16
    const call = makeScriptCall(live.client, ECHO, heads("cl", buckets))
    const all = () => Promise.all(Array.from({ length: buckets }, (_, b) => call(b, [`q${b}`])))
    const expected = Array.from({ length: buckets }, (_, b) => [`{cl:${b}}:cold`, `{cl:${b}}`, "0", "15000", `q${b}`])
    expect(await all()).toEqual(expected)
    const masters = await live.server.masters()
    const shards = new Set(await Promise.all(Array.from({ length: buckets }, (_, b) => live.server.masterOf(keySlot(`{cl:${b}}`)))))
    expect(shards.size).toBe(masters.length)
    for (const port of masters) await live.server.cli(port, "SCRIPT", "FLUSH")
    expect(await all()).toEqual(expected)
  })
})
