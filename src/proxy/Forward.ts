// Streams one request to its worker and the response back (docs/proxy.md
// "Forwarding", "Limits"). `sendRequest` dispatches and waits for the worker's headers, which it relays;
// there the request's fiber ends (the inflight cap covers only that wait), and the exchange
// streams the body to the client by itself, under the body-idle limit.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http"
import { Readable } from "node:stream"
import { Effect } from "effect"
import type { Dispatcher } from "undici"
import { ClientAborted } from "../Errors.js"
import { awaitHeaders, Exchange, Phase, type Outbound, type SendError } from "./Exchange.js"
import type { ForwardContextService } from "./ForwardContext.js"
import { relayResponseHeaders, relayTrailers } from "./Headers.js"

class HttpExchange extends Exchange {
  constructor(
    forward: ForwardContextService,
    outbound: Outbound,
    hasBody: boolean,
    private readonly res: ServerResponse,
    private readonly origin: string | undefined
  ) {
    super(forward, outbound, hasBody)
  }

  protected override onUploadIdle(): void {
    this.res.destroy()
  }

  protected onFailure(): void {
    if (this.res.headersSent && !this.res.writableFinished) this.res.destroy()
  }

  protected answered(statusCode: number, headers: Record<string, string | Array<string>>): void {
    this.res.writeHead(statusCode, relayResponseHeaders(headers, this.origin))
    // The body streams under the idle limit: each chunk (or the client draining) restarts it.
    this.startLimit("idle", this.forward.limits.bodyIdleMs)
  }

  protected override relay(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.res.write(chunk)) {
      controller.pause()
      this.res.once("drain", () => {
        this.timer.restart()
        controller.resume()
      })
    }
  }

  /** node:http sends trailers only on a chunked response, as the worker's was if it had any. */
  protected override relayEnd(trailers: IncomingHttpHeaders): void {
    const relayed = relayTrailers(trailers)
    if (relayed !== undefined) this.res.addTrailers(relayed)
    this.res.end()
  }

  /** The client went away: the worker's side of the exchange is abandoned too. */
  onClientClose = (): void => {
    if (this.phase < Phase.Done && this.failure === undefined) this.abort(new Error("client closed"))
  }
}

/**
 * The request body, read lazily: an exchange abandoned before sending (stale, connect
 * timeout) destroys this stream, not the client's request, and has read nothing of it.
 */
const bodyOf = (req: IncomingMessage, exchange: Exchange): Readable =>
  Readable.from(chunksOf(req, exchange), { objectMode: false })

async function* chunksOf(req: IncomingMessage, exchange: Exchange): AsyncGenerator<Buffer> {
  for await (const chunk of req.iterator({ destroyOnReturn: false })) {
    exchange.bodyChunkSent()
    yield chunk as Buffer
  }
  exchange.bodySent()
}

const clientGone = (req: IncomingMessage, res: ServerResponse): boolean => req.socket.destroyed || res.destroyed

/** Dispatches the request and waits for the worker's headers, which it relays; the body then streams on. */
export const sendRequest = (
  forward: ForwardContextService,
  req: IncomingMessage,
  res: ServerResponse,
  outbound: Outbound,
  hasBody: boolean
): Effect.Effect<HttpExchange, SendError> => {
  if (clientGone(req, res)) return new ClientAborted()
  const exchange = new HttpExchange(forward, outbound, hasBody, res, req.headers.origin)
  res.on("close", exchange.onClientClose)
  forward.upstream.dispatch(
    {
      origin: outbound.origin,
      path: outbound.path,
      method: req.method ?? "GET",
      headers: outbound.headers as Record<string, string | Array<string>>,
      body: hasBody ? bodyOf(req, exchange) : null,
      headersTimeout: 0,
      bodyTimeout: 0
    },
    exchange
  )
  return awaitHeaders(exchange, () => clientGone(req, res))
}
