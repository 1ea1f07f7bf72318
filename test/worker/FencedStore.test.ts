// The epoch fence on a real redis-server (docs/worker.md): a write or delete with an epoch older
// than the stored one is refused atomically, whatever else races with it.
import { Redis } from "ioredis"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { compareEpochs } from "../../src/contract/Epochs.js"
import { FencedStore, StaleEpochError } from "../../src/worker/FencedStore.js"
import { startRedisServer, type RedisServer } from "../support/RedisServer.js"

let server: RedisServer
let client: Redis
let other: Redis
let prefixes = 0

beforeAll(async () => {
  server = await startRedisServer()
  client = new Redis({ port: server.port, host: "127.0.0.1" })
  other = new Redis({ port: server.port, host: "127.0.0.1" })
})

afterAll(async () => {
  client?.disconnect()
  other?.disconnect()
  await server?.stop()
})

/** A store under a prefix of its own, so tests share the server but no keys. */
const freshStore = (redis: Redis = client) => {
  const prefix = `fence${prefixes++}`
  return { store: new FencedStore(redis, { prefix }), prefix }
}

const staleError = async (attempt: Promise<void>): Promise<StaleEpochError> => {
  const error: unknown = await attempt.then(
    () => undefined,
    (e: unknown) => e
  )
  expect(error).toBeInstanceOf(StaleEpochError)
  return error as StaleEpochError
}

const readText = async (store: FencedStore, key: string) => {
  const found = await store.read(key)
  return found && { value: found.value.toString("utf8"), epoch: found.epoch }
}

describe("FencedStore", () => {
  it("round-trips a string value with its epoch", async () => {
    const { store } = freshStore()
    expect(await store.read("a")).toBeUndefined()
    await store.write("a", "hello", "1")
    const found = await store.read("a")
    expect(found).toStrictEqual({ value: Buffer.from("hello"), epoch: "1" })
    expect(Buffer.isBuffer(found?.value)).toBe(true)
  })

  it("round-trips binary values byte for byte", async () => {
    const { store } = freshStore()
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i))
    await store.write("bin", bytes, "3")
    expect((await store.read("bin"))?.value.equals(bytes)).toBe(true)
    await store.write("empty", Buffer.alloc(0), "3")
    expect(await store.read("empty")).toStrictEqual({ value: Buffer.alloc(0), epoch: "3" })
  })

  it("stores under ${prefix}:{key}, default prefix pbf", async () => {
    const key = `layout-${prefixes++}`
    await new FencedStore(client).write(key, "v", "2")
    expect(await client.hgetall(`pbf:{${key}}`)).toStrictEqual({ epoch: "2", value: "v" })
    const { store, prefix } = freshStore()
    await store.write("k", "w", "5")
    expect(await client.hgetall(`${prefix}:{k}`)).toStrictEqual({ epoch: "5", value: "w" })
  })

  it("lets a higher epoch overwrite", async () => {
    const { store } = freshStore()
    await store.write("k", "old owner", "4")
    await store.write("k", "new owner", "5")
    expect(await readText(store, "k")).toStrictEqual({ value: "new owner", epoch: "5" })
  })

  it("lets the same epoch write again", async () => {
    const { store } = freshStore()
    await store.write("k", "first", "7")
    await store.write("k", "second", "7")
    expect(await readText(store, "k")).toStrictEqual({ value: "second", epoch: "7" })
  })

  it("refuses a lower epoch with StaleEpochError and leaves the value alone", async () => {
    const { store } = freshStore()
    await store.write("k", "new owner", "8")
    const error = await staleError(store.write("k", "old owner", "7"))
    expect(error.name).toBe("StaleEpochError")
    expect(error).toBeInstanceOf(Error)
    expect(error.key).toBe("k")
    expect(error.presented).toBe("7")
    expect(error.stored).toBe("8")
    expect(error.message).toContain("presented 7, stored 8")
    expect(await readText(store, "k")).toStrictEqual({ value: "new owner", epoch: "8" })
  })

  it("compares epochs as numbers, not as text", async () => {
    const { store } = freshStore()
    await store.write("k", "nine", "9")
    await store.write("k", "ten", "10") // lexically "10" < "9"
    expect((await staleError(store.write("k", "nine again", "9"))).stored).toBe("10")
    expect(await readText(store, "k")).toStrictEqual({ value: "ten", epoch: "10" })
  })

  it("compares epochs beyond 2^53 and 2^64 exactly", async () => {
    const { store } = freshStore()
    // 2^53 + 1 and 2^53 are the same Lua (double) number; the fence must still tell them apart.
    await store.write("k", "a", "9007199254740993")
    expect((await staleError(store.write("k", "b", "9007199254740992"))).stored).toBe("9007199254740993")
    await store.write("k", "c", "18446744073709551617") // 2^64 + 1
    const error = await staleError(store.write("k", "d", "18446744073709551616"))
    expect([error.presented, error.stored]).toStrictEqual(["18446744073709551616", "18446744073709551617"])
    // The longest epochs (40 digits), beyond 2^128.
    await store.write("k", "e", "1000000000000000000000000000000000000000")
    await staleError(store.write("k", "f", "999999999999999999999999999999999999999"))
    expect(await readText(store, "k")).toStrictEqual({ value: "e", epoch: "1000000000000000000000000000000000000000" })
  })

  it("fences delete the same way and keeps the fence after it", async () => {
    const { store } = freshStore()
    await store.write("k", "v", "5")
    const refused = await staleError(store.delete("k", "4"))
    expect([refused.key, refused.presented, refused.stored]).toStrictEqual(["k", "4", "5"])
    expect(await readText(store, "k")).toStrictEqual({ value: "v", epoch: "5" })

    await store.delete("k", "6")
    expect(await store.read("k")).toBeUndefined()
    expect((await staleError(store.write("k", "late", "5"))).stored).toBe("6")
    expect(await store.read("k")).toBeUndefined()

    await store.write("k", "again", "6")
    expect(await readText(store, "k")).toStrictEqual({ value: "again", epoch: "6" })
  })

  it("fences a key that was deleted before it was ever written", async () => {
    const { store } = freshStore()
    await store.delete("k", "12")
    expect(await store.read("k")).toBeUndefined()
    expect((await staleError(store.write("k", "v", "11"))).stored).toBe("12")
  })

  it("claim raises the fence and answers the value as stored: the old owner can write no more", async () => {
    const { store } = freshStore()
    expect(await store.claim("k", "1")).toBeUndefined()
    await store.write("k", Buffer.from([0, 255, 1]), "1")
    expect(await store.claim("k", "2")).toEqual(Buffer.from([0, 255, 1]))
    const refused = await staleError(store.write("k", "old owner", "1"))
    expect([refused.presented, refused.stored]).toEqual(["1", "2"])
    expect(await store.read("k")).toEqual({ value: Buffer.from([0, 255, 1]), epoch: "2" })
    await store.write("k", "new owner", "2")
    expect(await readText(store, "k")).toEqual({ value: "new owner", epoch: "2" })
  })

  it("claim is fenced too: an older owner cannot take the key back", async () => {
    const { store } = freshStore()
    await store.claim("k", "5")
    const refused = await staleError(store.claim("k", "4").then(() => undefined))
    expect([refused.presented, refused.stored]).toEqual(["4", "5"])
  })

  it("keeps the fence under racing writers from two epochs", async () => {
    // Two owners on two connections, "9" (the old) and "10" (the new, lexically smaller).
    // MONITOR gives the order in which Redis ran the scripts; replaying the fence over
    // that order must predict every outcome the writers saw.
    const { store: oldOwner, prefix } = freshStore(client)
    const newOwner = new FencedStore(other, { prefix })
    const redisKey = `${prefix}:{race}`
    const writes = 200
    const monitor = await client.monitor()
    const ran: Array<{ epoch: string; value: string }> = []
    const allRan = new Promise<void>((resolve) => {
      monitor.on("monitor", (_time: string, args: Array<string>, source: string) => {
        // eval(sha) <script> 1 <key> <epoch> <op> <value>: the script's own call, not its inner commands.
        if (source === "lua" || !/^eval/i.test(args[0] ?? "") || args[3] !== redisKey) return
        ran.push({ epoch: args[4]!, value: args[6]! })
        if (ran.length === writes) resolve()
      })
    })
    const outcomes = new Map<string, "written" | "stale">()
    const attempt = (store: FencedStore, epoch: string, value: string) =>
      store.write("race", value, epoch).then(
        () => void outcomes.set(value, "written"),
        (error: unknown) => {
          expect(error).toBeInstanceOf(StaleEpochError)
          expect((error as StaleEpochError).stored).toBe("10")
          outcomes.set(value, "stale")
        }
      )
    const pending: Array<Promise<void>> = []
    try {
      for (let round = 0; round < writes / 10; round++) {
        // Halfway, wait for the new owner's first write: every later old-owner write must fail.
        if (round === writes / 20) await pending[1]
        for (let i = 0; i < 5; i++) {
          pending.push(attempt(oldOwner, "9", `9:${round}:${i}`), attempt(newOwner, "10", `10:${round}:${i}`))
        }
        await new Promise((resolve) => setImmediate(resolve))
      }
      await Promise.all(pending)
      await allRan
    } finally {
      monitor.disconnect()
    }

    expect(outcomes.size).toBe(writes)
    let stored: string | undefined
    let lastWritten: string | undefined
    for (const { epoch, value } of ran) {
      const expected = stored === undefined || compareEpochs(epoch, stored) >= 0 ? "written" : "stale"
      expect(outcomes.get(value), value).toBe(expected)
      if (expected === "written") [stored, lastWritten] = [epoch, value]
    }
    const refused = [...outcomes].filter(([value, outcome]) => outcome === "stale" && value.startsWith("9:"))
    expect(refused.length).toBeGreaterThanOrEqual(writes / 4)
    expect([...outcomes].filter(([value, outcome]) => value.startsWith("10:") && outcome !== "written")).toStrictEqual([])
    expect(await readText(oldOwner, "race")).toStrictEqual({ value: lastWritten, epoch: "10" })
  })

  it("rejects a malformed epoch with a TypeError before calling Redis", async () => {
    const called: Array<string> = []
    const recorder = new Proxy({} as Redis, {
      get: (_target, name) =>
        name === "defineCommand"
          ? () => undefined
          : (..._args: Array<unknown>) => {
              called.push(String(name))
              return Promise.reject(new Error(`Redis was called: ${String(name)}`))
            }
    })
    const offline = new FencedStore(recorder)
    const { store, prefix } = freshStore()
    for (const bad of ["", "01", "-1", "1.0", " 1", "1\n", "1e3", "abc", 5 as unknown as string]) {
      await expect(offline.write("k", "v", bad)).rejects.toThrow(TypeError)
      await expect(offline.delete("k", bad)).rejects.toThrow(TypeError)
      await expect(store.write("k", "v", bad)).rejects.toThrow(/invalid epoch/)
      await expect(store.delete("k", bad)).rejects.toThrow(/invalid epoch/)
    }
    expect(called).toStrictEqual([])
    expect(await client.exists(`${prefix}:{k}`)).toBe(0)
  })

  it("keeps keys with special characters apart and intact", async () => {
    const { store, prefix } = freshStore()
    const keys = ["a b", "a:b", "{x}", "}{", "{", "}", "{a}b}", "*", "?[]", "line\nbreak", "ключ", "🎉", "", "pbf:{x}"]
    for (const [i, key] of keys.entries()) await store.write(key, `value ${i}`, String(i + 1))
    for (const [i, key] of keys.entries()) {
      expect(await readText(store, key), JSON.stringify(key)).toStrictEqual({ value: `value ${i}`, epoch: String(i + 1) })
      expect(await client.hget(`${prefix}:{${key}}`, "epoch")).toBe(String(i + 1))
    }
    expect((await staleError(store.write("{x}", "late", "1"))).key).toBe("{x}")
  })
})
