// Traces end to end (docs/operations.md "Traces", docs/worker.md "Traces"): the built Pinboard
// with PINBOARD_OTLP_ENDPOINT at an OTLP/HTTP JSON receiver this test runs, a library worker
// whose `traces` option points at the same receiver, and a fixture worker that echoes the
// headers it is sent; then a Pinboard without an endpoint. Spans are exported in batches (every
// 5 s), so the checks poll the receiver.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { eventually, uid, waitForColdStart, type Pinboard } from "../support/Fleet.js"
import { LibraryFleet, type LibraryWorker } from "../support/LibraryFleet.js"
import { OtlpReceiver, type ReceivedSpan } from "../support/OtlpReceiver.js"
import { killPid } from "../support/Processes.js"
import { scaled } from "../support/Time.js"
import { request } from "../support/Wire.js"

/** Nominal ms to wait for a span: the exporters send every 5 s. */
const EXPORTED_WITHIN_MS = 15_000

const SERVER = 2
const CLIENT = 3
const OK = 1
const ERROR = 2

const hex = (bytes: number) => randomBytes(bytes).toString("hex")
const traceparent = (traceId: string, spanId: string, flags = "01") => `00-${traceId}-${spanId}-${flags}`

let receiver: OtlpReceiver
const lf = new LibraryFleet()
const LIBRARY_NS = `/${uid("lib")}`
const ECHO_NS = `/${uid("echo")}`
const UNTRACED_NS = `/${uid("untraced")}`
let library: LibraryWorker
let untraced: LibraryWorker

beforeAll(async () => {
  receiver = await OtlpReceiver.start()
  await lf.start({ env: { PINBOARD_OTLP_ENDPOINT: receiver.url } })
  library = await lf.worker({ namespaces: [LIBRARY_NS], otlpEndpoint: receiver.url })
  untraced = await lf.worker({ namespaces: [UNTRACED_NS] })
  await lf.fleet.worker(lf.pinboard, { id: uid("echo"), namespaces: [ECHO_NS] })
}, scaled(60_000))

afterAll(async () => {
  await lf.stop()
  await receiver?.stop()
})

/** The spans of the trace once `complete` holds for them. */
const spansOnceThere = (traceId: string, complete: (spans: ReadonlyArray<ReceivedSpan>) => boolean) =>
  eventually(() => {
    const spans = receiver.spans().filter((span) => span.traceId === traceId)
    if (!complete(spans)) throw new Error(`trace ${traceId} incomplete: ${JSON.stringify(spans)}`)
    return spans
  }, EXPORTED_WITHIN_MS)

const named = (spans: ReadonlyArray<ReceivedSpan>, service: string, name: string) => spans.filter((span) => span.service === service && span.name === name)

/** The one span of `service` named `name` in the trace, once every span in `names` has arrived. */
const awaitTrace = async (traceId: string, names: ReadonlyArray<readonly [string, string]>) => {
  const spans = await spansOnceThere(traceId, (arrived) => names.every(([service, name]) => named(arrived, service, name).length > 0))
  return (service: string, name: string): ReceivedSpan => {
    const matching = named(spans, service, name)
    expect(matching, `${service} ${name}`).toHaveLength(1)
    return matching[0]!
  }
}

const PINBOARD_SPANS = [["pinboard", "instance request"], ["pinboard", "resolve"], ["pinboard", "forward"]] as const

/** The headers the echo worker was sent. */
const echoedHeaders = (text: string) => (JSON.parse(text) as { headers: Record<string, string | undefined> }).headers

describe("traces with PINBOARD_OTLP_ENDPOINT set", () => {
  it("continues the client's trace through Pinboard's request, resolve and forward spans into the library worker's handler", async () => {
    const traceId = hex(16)
    const clientSpan = hex(8)
    const id = uid()
    const answer = await request(lf.pinboard, `${LIBRARY_NS}/${id}/state`, { headers: { traceparent: traceparent(traceId, clientSpan) } })
    expect(answer.status).toBe(200)
    const { epoch } = JSON.parse(answer.text) as { epoch: string }

    const span = await awaitTrace(traceId, [...PINBOARD_SPANS, ["pinboard-worker", "instance handler"]])
    const requestSpan = span("pinboard", "instance request")
    expect(requestSpan.parentSpanId).toBe(clientSpan)
    expect(requestSpan.kind).toBe(SERVER)
    expect(requestSpan.status.code).toBe(OK)
    expect(requestSpan.attributes).toEqual({
      "client.address": "127.0.0.1",
      "http.request.method": "GET",
      "network.protocol.version": "1.1",
      "pinboard.namespace": LIBRARY_NS,
      "pinboard.id": id,
      "pinboard.worker": library.id,
      "pinboard.epoch": epoch,
      "http.response.status_code": 200
    })
    const resolve = span("pinboard", "resolve")
    expect(resolve.parentSpanId).toBe(requestSpan.spanId)
    expect(resolve.attributes).toEqual({ "pinboard.worker": library.id, "pinboard.epoch": epoch, "pinboard.placed": true })
    const forward = span("pinboard", "forward")
    expect(forward.parentSpanId).toBe(requestSpan.spanId)
    expect(forward.kind).toBe(CLIENT)
    expect(forward.attributes).toEqual({ "pinboard.worker": library.id, "pinboard.epoch": epoch })
    // The traceparent Pinboard sends names its forward span: the worker's handler is its child.
    const handler = span("pinboard-worker", "instance handler")
    expect(handler.parentSpanId).toBe(forward.spanId)
    expect(handler.kind).toBe(SERVER)
    expect(handler.attributes).toMatchObject({
      "http.request.method": "GET",
      "url.path": `${LIBRARY_NS}/${id}/state`,
      "pinboard.worker": library.id,
      "pinboard.epoch": epoch,
      "http.response.status_code": 200
    })
  })

  it("carries the trace through a call from an instance: the call's request span is a child of the calling handler", async () => {
    const traceId = hex(16)
    const id = uid()
    const answer = await request(lf.pinboard, `${LIBRARY_NS}/${id}/chain?to=1`, { method: "POST", headers: { traceparent: traceparent(traceId, hex(8)) } })
    expect(answer.status).toBe(200)
    const inTrace = await spansOnceThere(traceId, (spans) => spans.filter((span) => span.name === "instance handler" || span.name === "forward").length === 4)
    const spans = (service: string, name: string) => named(inTrace, service, name)
    const handlerOf = (path: string) => spans("pinboard-worker", "instance handler").find((span) => span.attributes["url.path"] === path)!
    const caller = handlerOf(`${LIBRARY_NS}/${id}/chain`)
    const callee = handlerOf(`${LIBRARY_NS}/${id}.1/chain`)
    const requests = spans("pinboard", "instance request")
    const call = requests.find((span) => span.attributes["pinboard.id"] === `${id}.1`)!
    expect(call.parentSpanId).toBe(caller.spanId)
    const callForward = spans("pinboard", "forward").find((span) => span.parentSpanId === call.spanId)!
    expect(callee.parentSpanId).toBe(callForward.spanId)
  })

  it("passes the trace on through a worker that does not trace: its calls carry the traceparent it was sent", async () => {
    const traceId = hex(16)
    const id = uid()
    const answer = await request(lf.pinboard, `${UNTRACED_NS}/${id}/chain?to=1`, { method: "POST", headers: { traceparent: traceparent(traceId, hex(8)) } })
    expect(answer.status).toBe(200)
    const spans = await spansOnceThere(traceId, (inTrace) => inTrace.filter((span) => span.name === "forward").length === 2)
    const requestFor = (instance: string) => spans.find((span) => span.name === "instance request" && span.attributes["pinboard.id"] === instance)!
    const firstForward = spans.find((span) => span.name === "forward" && span.parentSpanId === requestFor(id).spanId)!
    expect(requestFor(`${id}.1`).parentSpanId).toBe(firstForward.spanId)
    expect(spans.filter((span) => span.service === "pinboard-worker")).toEqual([])
    expect(untraced.id).toBe(firstForward.attributes["pinboard.worker"])
  })

  it("traces a WebSocket upgrade into the library worker: its instance upgrade span, 101, under Pinboard's forward", async () => {
    const traceId = hex(16)
    const clientSpan = hex(8)
    const id = uid()
    const socket = new WebSocket(`ws://127.0.0.1:${lf.pinboard.port}${LIBRARY_NS}/${id}/ws`, { headers: { traceparent: traceparent(traceId, clientSpan) } })
    const hello = await new Promise<{ epoch: string }>((resolve, reject) => {
      socket.once("message", (data: Buffer) => resolve(JSON.parse(data.toString()) as { epoch: string }))
      socket.once("error", reject)
    })
    socket.close()
    const span = await awaitTrace(traceId, [...PINBOARD_SPANS, ["pinboard-worker", "instance upgrade"]])
    expect(span("pinboard", "instance request").attributes).toMatchObject({ "http.response.status_code": 101 })
    const upgrade = span("pinboard-worker", "instance upgrade")
    expect(upgrade.parentSpanId).toBe(span("pinboard", "forward").spanId)
    expect(upgrade.kind).toBe(SERVER)
    expect(upgrade.status.code).not.toBe(ERROR)
    expect(upgrade.attributes).toMatchObject({
      "http.request.method": "GET",
      "url.path": `${LIBRARY_NS}/${id}/ws`,
      "pinboard.worker": library.id,
      "pinboard.epoch": hello.epoch,
      "http.response.status_code": 101
    })
  })

  it("sends the worker a traceparent naming its forward span, and the client's tracestate unchanged", async () => {
    const traceId = hex(16)
    const answer = await request(lf.pinboard, `${ECHO_NS}/${uid()}/echo`, {
      headers: { traceparent: traceparent(traceId, hex(8)), tracestate: "vendor=abc,other=1" }
    })
    expect(answer.status).toBe(200)
    const sent = echoedHeaders(answer.text)
    const span = await awaitTrace(traceId, PINBOARD_SPANS)
    expect(sent["traceparent"]).toBe(traceparent(traceId, span("pinboard", "forward").spanId))
    expect(sent["tracestate"]).toBe("vendor=abc,other=1")
  })

  it("starts a trace at Pinboard for a request without a traceparent (or with a malformed one)", async () => {
    const sent: Array<string> = []
    for (const headers of [{}, { traceparent: `00-${"0".repeat(32)}-${hex(8)}-01` }, { traceparent: "not a traceparent" }]) {
      const answer = await request(lf.pinboard, `${ECHO_NS}/${uid()}/echo`, { headers })
      expect(answer.status).toBe(200)
      sent.push(echoedHeaders(answer.text)["traceparent"] ?? "")
    }
    await Promise.all(
      sent.map(async (value) => {
        const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(value)
        expect(match, `the worker got traceparent ${value}`).not.toBeNull()
        const span = await awaitTrace(match![1]!, PINBOARD_SPANS)
        expect(span("pinboard", "instance request").parentSpanId).toBeUndefined()
        expect(span("pinboard", "forward").spanId).toBe(match![2])
      })
    )
  })

  it("records the catalogue error of an answer Pinboard wrote itself: 404 unknown namespace", async () => {
    const traceId = hex(16)
    const clientSpan = hex(8)
    const namespace = `/${uid("nope")}`
    const answer = await request(lf.pinboard, `${namespace}/x1`, { headers: { traceparent: traceparent(traceId, clientSpan) } })
    expect(answer.status).toBe(404)
    const span = await awaitTrace(traceId, [["pinboard", "instance request"], ["pinboard", "resolve"]])
    const requestSpan = span("pinboard", "instance request")
    expect(requestSpan.parentSpanId).toBe(clientSpan)
    expect(requestSpan.attributes).toEqual({
      "client.address": "127.0.0.1",
      "http.request.method": "GET",
      "network.protocol.version": "1.1",
      "pinboard.namespace": namespace,
      "pinboard.id": "x1",
      "pinboard.error": "UnknownNamespace",
      "http.response.status_code": 404
    })
    // A 4xx is the client's: the request span is not an error; the resolve that refused is.
    expect(requestSpan.status.code).toBe(OK)
    const resolve = span("pinboard", "resolve")
    expect(resolve.parentSpanId).toBe(requestSpan.spanId)
    expect(resolve.status.code).toBe(ERROR)
    expect(receiver.spans().filter((s) => s.traceId === traceId && s.name === "forward")).toEqual([])
  })

  it("leaves a request the client did not sample untraced, its traceparent forwarded as received", async () => {
    const unsampled = hex(16)
    const unsampledParent = traceparent(unsampled, hex(8), "00")
    const toEcho = await request(lf.pinboard, `${ECHO_NS}/${uid()}/echo`, { headers: { traceparent: unsampledParent } })
    expect(echoedHeaders(toEcho.text)["traceparent"]).toBe(unsampledParent)
    const id = uid()
    const toLibrary = await request(lf.pinboard, `${LIBRARY_NS}/${id}/state`, { headers: { traceparent: unsampledParent } })
    expect(toLibrary.status).toBe(200)

    // Spans are exported in the order they end: once a later request's spans have arrived, from
    // Pinboard and from the worker, any span of the unsampled requests would have too.
    const later = hex(16)
    await request(lf.pinboard, `${LIBRARY_NS}/${id}/state`, { headers: { traceparent: traceparent(later, hex(8)) } })
    await awaitTrace(later, [...PINBOARD_SPANS, ["pinboard-worker", "instance handler"]])
    expect(receiver.spans().filter((span) => span.traceId === unsampled)).toEqual([])
    expect(receiver.strays).toEqual([])
  })
})

describe("traces at PINBOARD_OTLP_SAMPLE_RATIO=0.5", () => {
  it("traces about half the requests without a traceparent, tells the worker which with the sampled flag, and follows every caller's decision", async () => {
    const sampler = await OtlpReceiver.start()
    let half: Pinboard | undefined
    try {
      half = await lf.fleet.pinboard({ redis: lf.redis, env: { PINBOARD_OTLP_ENDPOINT: sampler.url, PINBOARD_OTLP_SAMPLE_RATIO: "0.5" } })
      const namespace = `/${uid("half")}`
      await lf.fleet.worker(half, { id: uid("echo-half"), namespaces: [namespace] })
      await waitForColdStart(half, namespace)

      const sent: Array<RegExpExecArray> = []
      for (let i = 0; i < 40; i++) {
        const answer = await request(half, `${namespace}/${uid()}/echo`)
        const value = echoedHeaders(answer.text)["traceparent"] ?? ""
        const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/.exec(value)
        expect(match, `the worker got traceparent ${value}`).not.toBeNull()
        sent.push(match!)
      }
      const sampled = sent.filter((match) => match[3] === "01")
      const unsampled = sent.filter((match) => match[3] === "00")
      // Both are all but certain: each way has a chance of 2^-40.
      expect(sampled.length).toBeGreaterThan(0)
      expect(unsampled.length).toBeGreaterThan(0)

      // A caller's decision is followed whatever the ratio: 20 sampled, 20 not.
      const callerSampled = Array.from({ length: 20 }, () => hex(16))
      const callerUnsampled = Array.from({ length: 20 }, () => traceparent(hex(16), hex(8), "00"))
      for (const traceId of callerSampled) expect((await request(half, `${namespace}/${uid()}/echo`, { headers: { traceparent: traceparent(traceId, hex(8)) } })).status).toBe(200)
      for (const given of callerUnsampled) {
        const answer = await request(half, `${namespace}/${uid()}/echo`, { headers: { traceparent: given } })
        expect(echoedHeaders(answer.text)["traceparent"]).toBe(given)
      }

      // Spans are exported in the order they end: once a last sampled request's spans are in, any of the others' would be too.
      const last = hex(16)
      expect((await request(half, `${namespace}/${uid()}/echo`, { headers: { traceparent: traceparent(last, hex(8)) } })).status).toBe(200)
      await eventually(() => {
        const traced = new Set(sampler.spans().map((span) => span.traceId))
        const missing = [...sampled.map((match) => match[1]!), ...callerSampled, last].filter((traceId) => !traced.has(traceId))
        if (missing.length > 0) throw new Error(`no spans yet for ${missing.join(", ")}`)
      }, EXPORTED_WITHIN_MS)
      for (const match of sampled) {
        const forward = sampler.spans().find((span) => span.traceId === match[1] && span.name === "forward")
        expect(forward?.spanId).toBe(match[2])
      }
      const untraced = new Set([...unsampled.map((match) => match[1]!), ...callerUnsampled.map((given) => given.split("-")[1]!)])
      expect(sampler.spans().filter((span) => untraced.has(span.traceId))).toEqual([])
      expect(sampler.strays).toEqual([])
    } finally {
      await half?.stop()
      await sampler.stop()
    }
  })
})

describe("traces without an endpoint", () => {
  it("sends nothing, even with the OpenTelemetry SDK's variables set, and adds no traceparent", async () => {
    const quiet = await OtlpReceiver.start()
    let off: Pinboard | undefined
    try {
      off = await lf.fleet.pinboard({
        redis: lf.redis,
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: quiet.url, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${quiet.url}/v1/traces` }
      })
      const namespace = `/${uid("off")}`
      await lf.fleet.worker(off, { id: uid("echo-off"), namespaces: [namespace] })
      await waitForColdStart(off, namespace)

      const plain = await request(off, `${namespace}/${uid()}/echo`)
      expect(plain.status).toBe(200)
      expect(echoedHeaders(plain.text)["traceparent"]).toBeUndefined()
      const given = traceparent(hex(16), hex(8))
      const traced = await request(off, `${namespace}/${uid()}/echo`, { headers: { traceparent: given, tracestate: "vendor=abc" } })
      expect(echoedHeaders(traced.text)).toMatchObject({ traceparent: given, tracestate: "vendor=abc" })

      // A graceful stop is where an exporter sends what it holds: once Pinboard has exited, nothing more can come.
      killPid(off.pid, "SIGTERM")
      expect(await off.process.exited).toEqual({ code: 0, signal: null })
      expect(quiet.spans()).toEqual([])
      expect(quiet.strays).toEqual([])
    } finally {
      await off?.stop()
      await quiet.stop()
    }
  })
})
