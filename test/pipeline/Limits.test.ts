// The time rules of a forward, driven by TestClock with a worker the test plays (seed
// "Limits", docs/proxy.md "Retries"): connect timeout, header timeout, body
// idle, the 5 s re-resolve. A real node:http server and client carry the request.
import { describe, expect, it } from "@effect/vitest"
import type { Readable } from "node:stream"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { makeFakeUpstream } from "../support/FakeUpstream.js"
import { pipelineHarness } from "../support/PipelineHarness.js"
import { flush } from "../support/Turns.js"

const key = { env: "", namespace: "/threads", id: "t1" }
const harness = (fake: Parameters<typeof pipelineHarness>[0], stallResolves = 0) => pipelineHarness(fake, { stallResolves })

describe("forward limits under TestClock", () => {
  it.effect("a worker that does not connect within 5 s: 502, and the new placement is released", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { registry, request, nextCall, answered } = yield* harness(fake)
      const client = request("/threads/t1")
      yield* nextCall()
      yield* TestClock.adjust(4_999)
      yield* flush
      expect(answered()).toBe(false)
      yield* TestClock.adjust(1)
      const response = yield* Effect.promise(() => client.response)
      expect(response.status).toBe(502)
      expect(yield* Effect.promise(() => response.text())).toBe("bad gateway")
      const placement = yield* Effect.result(registry.placement(key))
      expect(placement._tag).toBe("Failure")
    })
  )

  it.effect("no headers within forwards.timeoutMs of sending: 504 upstream timeout", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { request, nextCall, answered } = yield* harness(fake)
      const client = request("/threads/t1")
      const call = yield* nextCall()
      call.connect()
      yield* TestClock.adjust(30_000 - 1)
      yield* flush
      expect(answered()).toBe(false)
      expect(call.controller.aborted).toBe(false)
      yield* TestClock.adjust(1)
      const response = yield* Effect.promise(() => client.response)
      expect(response.status).toBe(504)
      expect(response.headers.get("content-type")).toBe("text/plain; charset=utf-8")
      expect(yield* Effect.promise(() => response.text())).toBe("upstream timeout")
      expect(call.controller.aborted).toBe(true)
    })
  )

  it.effect("a streamed body is not cut by the header timeout, but by 60 s without data", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { request, nextCall } = yield* harness(fake)
      const client = request("/threads/t1")
      const call = yield* nextCall()
      call.connect()
      call.headers(200, { "content-type": "text/plain" })
      call.data("first")
      const response = yield* Effect.promise(() => client.response)
      expect(response.status).toBe(200)
      const reader = response.body!.getReader()
      const first = yield* Effect.promise(() => reader.read())
      expect(Buffer.from(first.value!).toString()).toBe("first")

      // Well past the header timeout, data keeps the body alive.
      yield* TestClock.adjust(59_000)
      call.data("second")
      yield* TestClock.adjust(59_000)
      const second = yield* Effect.promise(() => reader.read())
      expect(Buffer.from(second.value!).toString()).toBe("second")
      expect(call.controller.aborted).toBe(false)

      yield* TestClock.adjust(1_000)
      const cut = yield* Effect.promise(() => reader.read().then(() => "ended", () => "cut"))
      expect(cut).toBe("cut")
      expect(call.controller.aborted).toBe(true)
    })
  )

  it.effect("an upload is never cut while it keeps coming, but is after 60 s without a byte from the client", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { request, nextCall } = yield* harness(fake)
      let push: (chunk: string) => void = () => undefined
      const body = new ReadableStream<Uint8Array>({
        start: (controller) => {
          push = (chunk) => controller.enqueue(new TextEncoder().encode(chunk))
        }
      })
      const client = request("/threads/t1", { method: "POST", body, duplex: "half" } as RequestInit)
      let outcome = "pending"
      void client.response.then(() => (outcome = "answered"), () => (outcome = "cut"))
      push("first")
      const call = yield* nextCall()
      call.connect()
      const sent = (call.options.body as Readable)[Symbol.asyncIterator]()
      const chunk = () => Effect.promise(() => sent.next().then((next) => Buffer.from(next.value as Buffer).toString()))
      expect(yield* chunk()).toBe("first")
      // Ten minutes of a slow upload: each byte restarts the limit, and nothing else bounds it.
      for (let minute = 0; minute < 10; minute++) {
        yield* TestClock.adjust(59_000)
        push(`more-${minute}`)
        expect(yield* chunk()).toBe(`more-${minute}`)
      }
      expect(call.controller.aborted).toBe(false)
      expect(outcome).toBe("pending")
      yield* TestClock.adjust(60_000)
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 200)))
      expect(outcome).toBe("cut")
      expect(call.controller.aborted).toBe(true)
    })
  )

  it.effect("more than 5 s between resolve and send: resolved again before sending", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { request, nextCall } = yield* harness(fake, 1)
      const client = request("/threads/t1")
      const stale = yield* nextCall()
      stale.connect()
      expect(stale.controller.aborted).toBe(true)
      const fresh = yield* nextCall()
      fresh.connect()
      expect(fresh.controller.aborted).toBe(false)
      fresh.headers(200)
      fresh.end()
      const response = yield* Effect.promise(() => client.response)
      expect(response.status).toBe(200)
      expect(fake.calls.length).toBe(2)
    })
  )

  it.effect("re-resolves at most twice, then sends", () =>
    Effect.gen(function* () {
      const fake = makeFakeUpstream()
      const { request, nextCall } = yield* harness(fake, 10)
      const client = request("/threads/t1")
      for (let i = 0; i < 2; i++) {
        const stale = yield* nextCall()
        stale.connect()
        expect(stale.controller.aborted).toBe(true)
      }
      const last = yield* nextCall()
      last.connect()
      expect(last.controller.aborted).toBe(false)
      last.headers(204)
      last.end()
      const response = yield* Effect.promise(() => client.response)
      expect(response.status).toBe(204)
      expect(fake.calls.length).toBe(3)
    })
  )
})
