// What Forward.ts and Tunnel.ts share: one exchange with a worker as an undici handler that
// moves through phases, and an Effect that waits for a phase (or the exchange's failure).
import { Effect } from "effect"
import type { Dispatcher } from "undici"
import { BadGateway, ClientAborted, UpstreamTimeout } from "../Errors.js"
import { CONNECT_TIMEOUT_MS } from "./Limits.js"
import { ConnectFailed, StaleResolve } from "./Signals.js"

export const enum Phase {
  Connecting,
  /** Connected; the request body is on its way. */
  Sending,
  Sent,
  /** The worker's status and headers are in (or the upgrade). */
  Headers,
  Done
}

export abstract class Exchange implements Dispatcher.DispatchHandler {
  phase = Phase.Connecting
  failure: unknown = undefined
  stale = false
  protected controller: Dispatcher.DispatchController | undefined
  private wake: (() => void) | undefined

  /**
   * @param sendBy clock time after which the request is abandoned as stale, not sent
   * @param now the Clock's time, so a TestClock drives the stale check
   */
  constructor(
    private readonly sendBy: number,
    protected readonly now: () => number,
    private readonly hasBody: boolean
  ) {}

  protected advance(phase: Phase): void {
    if (phase > this.phase) this.phase = phase
    const wake = this.wake
    this.wake = undefined
    wake?.()
  }

  abort(reason: Error): void {
    if (this.controller !== undefined) this.controller.abort(reason)
    else this.fail(reason)
  }

  protected fail(error: unknown): void {
    if (this.failure !== undefined) return
    this.failure = error
    this.onFailure()
    this.advance(this.phase)
  }

  /** What a failure undoes beyond waking the waiter (a half-relayed response, say). */
  protected abstract onFailure(): void

  bodySent(): void {
    this.advance(Phase.Sent)
  }

  waitFor(phase: Phase): Effect.Effect<void> {
    return Effect.async<void>((resume) => {
      if (this.phase >= phase || this.failure !== undefined) return resume(Effect.void)
      this.wake = () => resume(Effect.void)
    })
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller
    if (this.failure !== undefined) {
      // Given up on (the connect timeout) before undici got this far: send nothing.
      controller.abort(new Error("abandoned"))
      return
    }
    if (this.now() > this.sendBy) {
      this.stale = true
      controller.abort(new Error("stale resolve"))
      return
    }
    this.advance(this.hasBody ? Phase.Sending : Phase.Sent)
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.fail(error)
  }
}

export type AwaitHeadersError = ConnectFailed | StaleResolve | UpstreamTimeout | BadGateway | ClientAborted

/**
 * Connect within CONNECT_TIMEOUT_MS, then, once the request is sent, the worker's headers
 * within `headersTimeoutMs` (seed "Limits"). A failure before sending is a connect failure.
 */
export const awaitHeaders = (
  exchange: Exchange,
  headersTimeoutMs: number,
  clientGone: () => boolean
): Effect.Effect<void, AwaitHeadersError> =>
  Effect.gen(function* () {
    const connected = yield* exchange.waitFor(Phase.Sending).pipe(Effect.timeout(CONNECT_TIMEOUT_MS), Effect.option)
    if (connected._tag === "None") {
      exchange.abort(new Error("connect timeout"))
      return yield* new ConnectFailed({ cause: "connect timeout" })
    }
    if (exchange.stale) return yield* new StaleResolve()
    if (exchange.phase === Phase.Connecting) return yield* new ConnectFailed({ cause: exchange.failure })

    yield* exchange.waitFor(Phase.Sent)
    const answered = yield* exchange.waitFor(Phase.Headers).pipe(Effect.timeout(headersTimeoutMs), Effect.option)
    if (answered._tag === "None") {
      exchange.abort(new Error("upstream timeout"))
      return yield* new UpstreamTimeout()
    }
    if (exchange.phase < Phase.Headers) {
      return yield* clientGone() ? new ClientAborted() : new BadGateway({ cause: exchange.failure })
    }
  })
