// Why Redis fails, said once (docs/deploy.md "When Redis fails: the reason"): each failure
// described by its own words and a bounded kind, a call that only says "connection down"
// described by the connection's last error, a warning when a failure starts or its reason
// changes (not per call), and the end once a time sample answers with no failure since the last.
import { describe, expect, it } from "vitest"
import { describeRedisFailure, type RedisFailure } from "../../src/registry/RedisFailure.js"
import { makeRedisHealth } from "../../src/registry/RedisHealth.js"

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code })
const STREAM_DOWN = new Error("Stream isn't writeable and enableOfflineQueue options is false")

describe("describeRedisFailure", () => {
  it.each([
    [new Error("WRONGPASS invalid username-password pair or user is disabled."), "auth"],
    [new Error("NOAUTH Authentication required."), "auth"],
    [new Error("NOPERM this user has no permissions to run the 'info' command"), "permission"],
    [withCode("self-signed certificate in certificate chain", "SELF_SIGNED_CERT_IN_CHAIN"), "tls"],
    [withCode("Hostname/IP does not match certificate's altnames", "ERR_TLS_CERT_ALTNAME_INVALID"), "tls"],
    [withCode("connect ECONNREFUSED 127.0.0.1:7000", "ECONNREFUSED"), "refused"],
    [withCode("getaddrinfo ENOTFOUND redis.internal", "ENOTFOUND"), "dns"],
    [new Error("Command timed out"), "timeout"],
    [new Error("CLUSTERDOWN The cluster is down"), "cluster"],
    [new Error("Failed to refresh slots cache."), "cluster"],
    [new Error("All sentinels are unreachable. Retrying from scratch after 10ms."), "sentinel"],
    [withCode("read ECONNRESET", "ECONNRESET"), "closed"],
    [STREAM_DOWN, "closed"],
    [new Error("ERR something new"), "other"]
  ] as const)("%s: %s", (error, kind) => {
    expect(describeRedisFailure(error)).toEqual({ kind, reason: error.message })
  })

  it("a call that only says the connection is down is described by the connection's error", () => {
    const refused = withCode("connect ECONNREFUSED 127.0.0.1:7000", "ECONNREFUSED")
    expect(describeRedisFailure(STREAM_DOWN, refused)).toEqual({ kind: "refused", reason: refused.message })
    // A call's own error wins over the connection's.
    expect(describeRedisFailure(new Error("NOPERM no"), refused).kind).toBe("permission")
  })

  it("one line, bounded, never a command's arguments; Promise.any's first error", () => {
    const long = Object.assign(new Error(`ERR ${"x".repeat(1000)}\nsecond line`), { command: { name: "evalsha", args: ["script body"] } })
    const failure = describeRedisFailure(long)
    expect(failure.reason.length).toBeLessThanOrEqual(303)
    expect(failure.reason).not.toContain("\n")
    expect(failure.reason).not.toContain("script body")
    expect(describeRedisFailure(new AggregateError([new Error("NOAUTH Authentication required.")]))).toEqual({
      kind: "auth",
      reason: "NOAUTH Authentication required."
    })
  })
})

describe("RedisHealth", () => {
  const tracker = () => {
    const said: Array<string> = []
    const counted: Array<string> = []
    const health = makeRedisHealth({
      failing: (failure: RedisFailure) => said.push(`failing ${failure.kind}: ${failure.reason}`),
      answering: (after) => said.push(`answering after ${after.kind}`),
      count: (kind) => counted.push(kind)
    })
    return { health, said, counted }
  }

  it("counts every failed call, says a failure once per reason, and its end after a clean sample", () => {
    const { health, said, counted } = tracker()
    const refused = withCode("connect ECONNREFUSED 127.0.0.1:7000", "ECONNREFUSED")
    health.connectionFailed(refused)
    for (let i = 0; i < 5; i++) health.failed(STREAM_DOWN)
    health.connectionFailed(STREAM_DOWN) // ioredis's own echo: not a new reason
    expect(counted).toEqual(["refused", "refused", "refused", "refused", "refused"])
    expect(said).toEqual(["failing refused: connect ECONNREFUSED 127.0.0.1:7000"])
    expect(health.current()?.kind).toBe("refused")

    health.failed(new Error("WRONGPASS invalid username-password pair or user is disabled."))
    expect(said.length).toBe(2)
    // A sample right after a failure does not end it; one with no failure since does.
    health.sampled()
    expect(health.current()).toBeDefined()
    health.connected()
    health.sampled()
    expect(said[2]).toBe("answering after auth")
    expect(health.current()).toBeUndefined()
    health.sampled()
    expect(said.length).toBe(3)
  })

  it("a node's connection error names the node", () => {
    const { health, said } = tracker()
    health.connectionFailed(withCode("connect ECONNREFUSED 127.0.0.1:7001", "ECONNREFUSED"), "127.0.0.1:7001")
    expect(said).toEqual(["failing refused: connect ECONNREFUSED 127.0.0.1:7001 (node 127.0.0.1:7001)"])
  })
})
