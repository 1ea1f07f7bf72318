// Resolve, inflight cap and forward with a worker the test plays: the in-band
// refusal (docs/proxy.md "Retries"), the per-worker inflight cap (docs/proxy.md) and the headers of the forward.
import { describe, expect, it } from "@effect/vitest"
import net from "node:net"
import { Deferred, Effect } from "effect"
import type { FakeCall } from "../support/FakeUpstream.js"
import { makeFakeUpstream } from "../support/FakeUpstream.js"
import { pipelineHarness } from "../support/PipelineHarness.js"
import { until } from "../support/Turns.js"

const key = { env: "", namespace: "/threads", id: "t1" }
const REFUSAL = { "pinned-refusal": "lease-unhealthy", "x-from-refusal": "1" }

const refuse = (call: FakeCall) => {
  call.connect()
  call.headers(503, REFUSAL)
  call.end()
}

const answer = (call: FakeCall, status = 200) => {
  call.connect()
  call.headers(status, { "content-type": "text/plain" })
  call.data("ok")
  call.end()
}

const workerOf = (call: FakeCall) => new URL(String(call.options.origin)).hostname.replace(".test", "")

describe("in-band refusal", () => {
  it.effect("a request without a body is re-placed once on another worker; the refusal is released and its nack counted", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { registry, request, nextCall } = yield* pipelineHarness(fake, { workers: ["w1", "w2"] })
      const client = request("/threads/t1")
      const first = yield* nextCall()
      refuse(first)
      const second = yield* nextCall()
      expect(workerOf(second)).not.toBe(workerOf(first))
      answer(second)
      const response = yield* Effect.promise(() => client.response)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-from-refusal")).toBeNull()
      expect(yield* Effect.promise(() => response.text())).toBe("ok")
      const workers = yield* registry.workers
      expect(workers.find((w) => w.worker === workerOf(first))!.nacks).toBe(1)
      expect((yield* registry.placement(key)).worker).toBe(workerOf(second))
    })
  )

  it.effect("a request with a body is not re-placed: 503 worker refused activation, retry", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { registry, request, nextCall } = yield* pipelineHarness(fake, { workers: ["w1", "w2"] })
      const client = request("/threads/t1", { method: "POST", body: "hello" })
      refuse(yield* nextCall())
      const response = yield* Effect.promise(() => client.response)
      expect(response.status).toBe(503)
      expect(response.headers.get("retry-after")).toBe("1")
      expect(response.headers.get("content-type")).toBe("application/json")
      expect(yield* Effect.promise(() => response.text())).toBe('{"error":"worker refused activation, retry"}')
      expect(fake.calls.length).toBe(1)
      expect((yield* Effect.result(registry.placement(key)))._tag).toBe("Failure")
    })
  )

  it.effect("a second refusal: 503 worker refused activation, retry", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { request, nextCall } = yield* pipelineHarness(fake, { workers: ["w1", "w2"] })
      const client = request("/threads/t1")
      refuse(yield* nextCall())
      refuse(yield* nextCall())
      const response = yield* Effect.promise(() => client.response)
      expect(response.status).toBe(503)
      expect(yield* Effect.promise(() => response.text())).toBe('{"error":"worker refused activation, retry"}')
      expect(fake.calls.length).toBe(2)
    })
  )

  it.effect("no other worker to re-place on: 503 worker refused activation, retry", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { request, nextCall } = yield* pipelineHarness(fake, { workers: ["w1"] })
      const client = request("/threads/t1")
      refuse(yield* nextCall())
      const response = yield* Effect.promise(() => client.response)
      expect(response.status).toBe(503)
      expect(yield* Effect.promise(() => response.text())).toBe('{"error":"worker refused activation, retry"}')
    })
  )
})

describe("inflight cap", () => {
  it.effect("forwards awaiting headers above forwards.maxInflight: 503 worker at capacity, retry", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { request, nextCall } = yield* pipelineHarness(fake, { config: { forwards: { timeoutMs: 30_000, maxInflight: 1 } } })
      const waiting = request("/threads/t1")
      const call = yield* nextCall()
      call.connect()
      const refused = yield* Effect.promise(() => request("/threads/t1").response)
      expect(refused.status).toBe(503)
      expect(refused.headers.get("retry-after")).toBe("1")
      expect(yield* Effect.promise(() => refused.text())).toBe('{"error":"worker at capacity, retry"}')
      expect(waiting.settled()).toBe(false)

      // Headers in: the slot is free again, even while the body still streams.
      call.headers(200)
      call.data("streaming")
      // The client has the headers, so the worker's were in before: the slot is free.
      const streaming = yield* Effect.promise(() => waiting.response)
      expect(streaming.status).toBe(200)
      const next = request("/threads/t1")
      answer(yield* nextCall())
      expect((yield* Effect.promise(() => next.response)).status).toBe(200)
      call.end()
      expect(yield* Effect.promise(() => streaming.text())).toBe("streaming")
    })
  )
  it.effect("a forward that fails before headers gives its slot back", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { request, nextCall } = yield* pipelineHarness(fake, { config: { forwards: { timeoutMs: 30_000, maxInflight: 1 } } })
      const failing = request("/threads/t1")
      ;(yield* nextCall()).fail(new Error("connect ECONNREFUSED"))
      expect((yield* Effect.promise(() => failing.response)).status).toBe(502)
      const next = request("/threads/t1")
      answer(yield* nextCall())
      expect((yield* Effect.promise(() => next.response)).status).toBe(200)
    })
  )
})

describe("the forward", () => {
  it.effect("goes to the worker's origin with the raw path and query, Pinboard-Epoch, X-Forwarded-For", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { registry, request, nextCall } = yield* pipelineHarness(fake)
      const client = request("/threads/t1/a%2Fb/c?x=%20&y", {
        headers: { "x-forwarded-for": "1.2.3.4", "pinboard-attestation": "forged", "pinboard-foo": "bar", "x-kept": "yes" }
      })
      const call = yield* nextCall()
      answer(call)
      yield* Effect.promise(() => client.response)
      expect(call.options.origin).toBe("http://w1.test")
      expect(call.options.path).toBe("/threads/t1/a%2Fb/c?x=%20&y")
      const headers = call.options.headers as Record<string, string>
      expect(headers["pinboard-epoch"]).toBe((yield* registry.placement(key)).epoch)
      expect(headers["x-forwarded-for"]).toBe("127.0.0.1")
      expect(headers["x-kept"]).toBe("yes")
      expect(headers["pinboard-attestation"]).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/)
      expect(headers["pinboard-foo"]).toBeUndefined()
      expect(headers["host"]).toBeUndefined()
    })
  )

  it.effect("a worker that fails before headers: 502 bad gateway; an existing placement stays", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { registry, request, nextCall } = yield* pipelineHarness(fake)
      const placing = request("/threads/t1")
      answer(yield* nextCall())
      yield* Effect.promise(() => placing.response)
      const epoch = (yield* registry.placement(key)).epoch

      const client = request("/threads/t1")
      const call = yield* nextCall()
      call.fail(new Error("connect ECONNREFUSED"))
      const response = yield* Effect.promise(() => client.response)
      expect(response.status).toBe(502)
      expect(yield* Effect.promise(() => response.text())).toBe("bad gateway")
      expect((yield* registry.placement(key)).epoch).toBe(epoch)
    })
  )
})

describe("a client that goes away", () => {
  it.effect("before the forward starts: nothing is sent to the worker", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const resolving = yield* Deferred.make<void>()
      const resolveMayGo = yield* Deferred.make<void>()
      const { port, handled, openConnections } = yield* pipelineHarness(fake, {
        holdResolves: Effect.andThen(Deferred.succeed(resolving, undefined), Deferred.await(resolveMayGo))
      })
      const socket = net.connect(port, "127.0.0.1")
      yield* Effect.promise(() => new Promise((resolve) => socket.once("connect", resolve)))
      socket.write("GET /threads/t1 HTTP/1.1\r\nHost: x\r\n\r\n")
      yield* Deferred.await(resolving)
      socket.destroy()
      yield* until(() => openConnections() === 0, "the server to see the client go")
      yield* Deferred.succeed(resolveMayGo, undefined)
      // Done with the request, or (wrongly) forwarding it to a worker that never answers.
      yield* until(() => handled() || fake.calls.length > 0, "the request to be handled")
      expect(fake.calls.length).toBe(0)
      expect(handled()).toBe(true)
    })
  )
})

describe("a defect anywhere in the pipeline", () => {
  it.effect("is answered 500 internal error, never left unanswered", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { request } = yield* pipelineHarness(fake, {
        clientAddress: {
          of: () => {
            throw new Error("a client address that cannot be read")
          }
        }
      })
      const response = yield* Effect.promise(() => request("/threads/t1").response)
      expect(response.status).toBe(500)
      expect(yield* Effect.promise(() => response.text())).toBe('{"error":"internal error"}')
      expect(fake.calls.length).toBe(0)
    })
  )
})
