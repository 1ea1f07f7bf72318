// An upstream client whose worker the test plays: each dispatch is recorded, and the test
// decides when it connects, answers, streams or stalls. With a TestClock this drives the
// limits of Forward.ts without waiting.
import type { Dispatcher } from "undici"
import type { UpstreamClient } from "../../src/proxy/Upstream.js"

class FakeController implements Dispatcher.DispatchController {
  aborted = false
  paused = false
  reason: Error | null = null
  constructor(private readonly handler: Dispatcher.DispatchHandler) {}
  abort(reason: Error): void {
    if (this.aborted) return
    this.aborted = true
    this.reason = reason
    this.handler.onResponseError?.(this, reason)
  }
  pause(): void {
    this.paused = true
  }
  resume(): void {
    this.paused = false
  }
}

export class FakeCall {
  readonly controller: FakeController
  constructor(
    readonly options: Dispatcher.DispatchOptions,
    readonly handler: Dispatcher.DispatchHandler
  ) {
    this.controller = new FakeController(handler)
  }
  /** The connection is up and the request goes out. */
  connect(): void {
    this.handler.onRequestStart?.(this.controller, {})
  }
  headers(status: number, headers: Record<string, string> = {}): void {
    this.handler.onResponseStart?.(this.controller, status, headers, "")
  }
  data(chunk: string): void {
    this.handler.onResponseData?.(this.controller, Buffer.from(chunk))
  }
  end(): void {
    this.handler.onResponseEnd?.(this.controller, {})
  }
  fail(error: Error): void {
    this.handler.onResponseError?.(this.controller, error)
  }
}

export interface FakeUpstream {
  readonly client: UpstreamClient
  readonly calls: ReadonlyArray<FakeCall>
  /** The next dispatch (already made or still to come). */
  readonly nextCall: () => Promise<FakeCall>
}

export const makeFakeUpstream = (): FakeUpstream => {
  const calls: Array<FakeCall> = []
  let taken = 0
  const waiting: Array<(call: FakeCall) => void> = []
  return {
    calls,
    client: {
      dispatch: (options, handler) => {
        const call = new FakeCall(options, handler)
        calls.push(call)
        waiting.shift()?.(call)
        return true
      }
    },
    nextCall: () => {
      const index = taken++
      if (index < calls.length) return Promise.resolve(calls[index]!)
      return new Promise((resolve) => waiting.push(resolve))
    }
  }
}
