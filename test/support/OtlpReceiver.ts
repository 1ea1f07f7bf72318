// An OTLP/HTTP JSON receiver for the trace tests: a node:http server on a free loopback port
// that keeps every span POSTed to /v1/traces, flattened with its resource's service.name and
// its attributes as plain values. Anything else it is sent is kept as a stray request.
import http from "node:http"
import type { AddressInfo } from "node:net"

export type AttributeValue = string | number | boolean

export interface ReceivedSpan {
  readonly service: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  readonly kind: number
  readonly attributes: Readonly<Record<string, AttributeValue>>
  /** OTLP's status code: 1 ok, 2 error. */
  readonly status: { readonly code: number; readonly message?: string }
}

interface OtlpAttribute {
  readonly key: string
  readonly value: { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number }
}

interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: ReadonlyArray<OtlpAttribute>
  readonly status: { readonly code: number; readonly message?: string }
}

interface TracesBody {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: { readonly attributes: ReadonlyArray<OtlpAttribute> }
    readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<OtlpSpan> }>
  }>
}

const plain = (value: OtlpAttribute["value"]): AttributeValue =>
  value.stringValue ?? (value.intValue === undefined ? undefined : Number(value.intValue)) ?? value.boolValue ?? value.doubleValue ?? ""

const attributesOf = (attributes: ReadonlyArray<OtlpAttribute>): Record<string, AttributeValue> =>
  Object.fromEntries(attributes.map((a) => [a.key, plain(a.value)]))

export class OtlpReceiver {
  private readonly received: Array<ReceivedSpan> = []
  /** Requests that were not a JSON POST to /v1/traces: "<method> <url> <content-type>". */
  readonly strays: Array<string> = []

  private constructor(
    private readonly server: http.Server,
    readonly url: string
  ) {}

  static async start(): Promise<OtlpReceiver> {
    const server = http.createServer()
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const receiver = new OtlpReceiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    server.on("request", (req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => chunks.push(chunk))
      req.on("end", () => {
        const type = req.headers["content-type"] ?? ""
        if (req.method !== "POST" || req.url !== "/v1/traces" || !type.startsWith("application/json")) {
          receiver.strays.push(`${req.method} ${req.url} ${type}`)
          return void res.writeHead(404).end()
        }
        receiver.keep(JSON.parse(Buffer.concat(chunks).toString()) as TracesBody)
        res.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    return receiver
  }

  private keep(body: TracesBody): void {
    for (const { resource, scopeSpans } of body.resourceSpans) {
      const service = String(attributesOf(resource.attributes)["service.name"])
      for (const { spans } of scopeSpans) {
        for (const span of spans) {
          this.received.push({
            service,
            traceId: span.traceId,
            spanId: span.spanId,
            parentSpanId: span.parentSpanId === "" ? undefined : span.parentSpanId,
            name: span.name,
            kind: span.kind,
            attributes: attributesOf(span.attributes),
            status: span.status
          })
        }
      }
    }
  }

  /** Every span received so far. */
  spans(): ReadonlyArray<ReceivedSpan> {
    return this.received
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
