// What Forward.ts and Tunnel.ts share: one exchange with a worker as an undici handler that
// moves through phases under the limits of docs/proxy.md, and an Effect that waits for the worker's
// headers (or says why there are none). The limits run on Deadlines, so a TestClock drives them.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http"
import { Effect } from "effect"
import type { Dispatcher } from "undici"
import { BadGateway, ClientAborted, UpstreamTimeout } from "../Errors.js"
import type { Timer } from "./Deadlines.js"
import type { ForwardContextService } from "./ForwardContext.js"
import { connectFailureReason, headersFailureReason } from "./GatewayFailure.js"
import { isRefusal } from "./Headers.js"
import { ConnectFailed, Refused, StaleResolve } from "./Signals.js"

export const enum Phase {
  Connecting,
  /** Connected; the request body is on its way. */
  Sending,
  Sent,
  /** The worker's status and headers are in (or the upgrade). */
  Headers,
  Done
}

/** What to send to a worker. */
export interface Outbound {
  readonly origin: string
  /** The worker's path prefix plus the raw path and query. */
  readonly path: string
  readonly headers: OutgoingHttpHeaders
  /** Clock time after which the request is reported stale instead of sent; Infinity: never. */
  readonly sendBy: number
}

/** `upload`: the client's request body idle; `idle`: the worker's response body idle. */
export type Limit = "connect" | "upload" | "headers" | "idle"

export abstract class Exchange implements Dispatcher.DispatchHandler {
  phase = Phase.Connecting
  failure: unknown = undefined
  stale = false
  /** The limit that ended the exchange, if one did. */
  expired: Limit | undefined = undefined
  /** The worker answered with the in-band refusal (docs/proxy.md "Retries"); its answer goes no further. */
  refused = false
  protected controller: Dispatcher.DispatchController | undefined
  /** One timer for the limit that currently applies. */
  protected readonly timer: Timer
  private limit: Limit = "connect"
  private wake: (() => void) | undefined

  constructor(
    protected readonly forward: ForwardContextService,
    private readonly outbound: Outbound,
    private readonly hasBody: boolean
  ) {
    this.timer = forward.deadlines.timer(() => this.expire())
    this.timer.start(forward.limits.connectMs)
  }

  protected advance(phase: Phase): void {
    if (phase > this.phase) this.phase = phase
    this.wake?.()
  }

  protected startLimit(limit: Limit, durationMs: number): void {
    this.limit = limit
    this.timer.start(durationMs)
  }

  private expire(): void {
    this.expired = this.limit
    if (this.limit === "upload") this.onUploadIdle()
    this.abort(new Error(`${this.limit} timeout`))
  }

  /** The client stopped sending its body: it is treated as gone. */
  protected onUploadIdle(): void {}

  /** A chunk of the request body went out: the upload's idle limit starts again. */
  bodyChunkSent(): void {
    if (this.limit === "upload") this.timer.restart()
  }

  abort(reason: Error): void {
    if (this.controller !== undefined) this.controller.abort(reason)
    else this.fail(reason)
  }

  protected fail(error: unknown): void {
    if (this.failure !== undefined) return
    this.failure = error
    this.timer.cancel()
    this.onFailure()
    this.wake?.()
  }

  /** What a failure undoes beyond waking the waiter (a half-relayed response, say). */
  protected abstract onFailure(): void

  /** The worker's final status and headers, unless they are a refusal. */
  protected abstract answered(statusCode: number, headers: Record<string, string | Array<string>>): void

  /** The whole request body has gone out: the wait for headers starts. */
  bodySent(): void {
    if (this.phase < Phase.Headers) this.startLimit("headers", this.forward.limits.headersMs)
    this.advance(Phase.Sent)
  }

  /** Calls `then` once, when the worker's headers are in or the exchange has failed (at once if so already). */
  whenHeadersOrFailed(then: () => void): void {
    if (this.phase >= Phase.Headers || this.failure !== undefined) return then()
    this.wake = () => {
      if (this.phase >= Phase.Headers || this.failure !== undefined) {
        this.wake = undefined
        then()
      }
    }
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller
    if (this.failure !== undefined) {
      // Given up on (the connect timeout) before undici got this far: send nothing.
      controller.abort(new Error("abandoned"))
      return
    }
    if (this.forward.now() > this.outbound.sendBy) {
      this.stale = true
      controller.abort(new Error("stale resolve"))
      return
    }
    this.timer.cancel()
    if (this.hasBody) {
      // No total request timeout (a long upload is not cut); a stalled one is, like a stalled response.
      this.startLimit("upload", this.forward.limits.bodyIdleMs)
      this.advance(Phase.Sending)
    } else this.bodySent()
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | Array<string>>
  ): void {
    if (statusCode < 200) return // interim responses are not relayed
    this.refused = isRefusal(statusCode, headers)
    this.headersIn()
    // A refusal's body is read and dropped, under the idle limit like any body.
    if (this.refused) this.startLimit("idle", this.forward.limits.bodyIdleMs)
    else this.answered(statusCode, headers)
    // Last: the waiting fiber resumes inside this call and reads what `answered` set.
    this.advance(Phase.Headers)
  }

  /** Body data: a refusal's is dropped; a relayed body's goes to `relay`. */
  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.timer.restart()
    if (!this.refused) this.relay(controller, chunk)
  }

  onResponseEnd(_controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    this.timer.cancel()
    if (!this.refused) this.relayEnd(trailers)
    this.advance(Phase.Done)
  }

  /** A chunk of the worker's body (none comes after a 101). */
  protected relay(_controller: Dispatcher.DispatchController, _chunk: Buffer): void {}

  /** The body is over; a chunked body's trailers came with it (undici reads them, none: `{}`). */
  protected relayEnd(_trailers: IncomingHttpHeaders): void {}

  /** The worker's headers are in: the header limit is met. */
  protected headersIn(): void {
    this.timer.cancel()
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.fail(error)
  }
}

export type SendError = ConnectFailed | StaleResolve | Refused | UpstreamTimeout | BadGateway | ClientAborted

/**
 * Waits for the worker's headers (a refusal fails as such), or says why there are none: a failure before the
 * request went out is a connect failure (docs/proxy.md "Limits": connect 5 s; header wait). Succeeds with the exchange.
 */
export const awaitHeaders = <X extends Exchange>(exchange: X, clientGone: () => boolean): Effect.Effect<X, SendError> =>
  Effect.callback<X, SendError>((resume) => exchange.whenHeadersOrFailed(() => resume(headersOutcome(exchange, clientGone))))

const headersOutcome = <X extends Exchange>(exchange: X, clientGone: () => boolean): Effect.Effect<X, SendError> => {
  if (exchange.phase >= Phase.Headers) return exchange.refused ? new Refused() : Effect.succeed(exchange)
  if (exchange.stale) return new StaleResolve()
  if (exchange.phase === Phase.Connecting) {
    const timedOut = exchange.expired === "connect"
    return new ConnectFailed({ reason: connectFailureReason(exchange.failure, timedOut), cause: timedOut ? "connect timeout" : exchange.failure })
  }
  if (exchange.expired === "headers") return new UpstreamTimeout()
  return clientGone() ? new ClientAborted() : new BadGateway({ reason: headersFailureReason(exchange.failure), cause: exchange.failure })
}
