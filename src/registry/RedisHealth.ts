// Why Redis is failing, said once (docs/operations.md "Logs"): every failed call is counted by
// its kind (pinboard_registry_failures_total), a warning is logged when a failure starts and
// whenever its reason changes, never once per request, and an info line when the registry
// answers again. /readyz shows the current reason. A call that only says the connection is down
// is described by the connection's own last error (the TLS handshake, WRONGPASS, the refused
// socket), which ioredis reports as an event, not on the call.
import { describeRedisFailure, isConnectionDown, type RedisFailure, type RedisFailureKind } from "./RedisFailure.js"

export interface RedisHealthReport {
  readonly failing: (failure: RedisFailure) => void
  readonly answering: (after: RedisFailure) => void
  readonly count: (kind: RedisFailureKind) => void
}

export interface RedisHealth {
  /** A call failed: counted, logged if its reason is new; the failure. */
  readonly failed: (cause: unknown) => RedisFailure
  /** The client's connection (a node's, on a Cluster) failed: the reason of the calls to come. */
  readonly connectionFailed: (error: unknown, node?: string) => void
  /** The client is connected and ready again. */
  readonly connected: () => void
  /**
   * The registry's time was sampled: the failure is over once a sample answers with no call
   * failed since the one before (on a Cluster, one dead shard keeps failing its own calls).
   */
  readonly sampled: () => void
  /** The failure under way, if any. */
  readonly current: () => RedisFailure | undefined
}

export const makeRedisHealth = (report: RedisHealthReport): RedisHealth => {
  let current: RedisFailure | undefined
  let connectionError: unknown
  let failedSinceSample = false

  const note = (failure: RedisFailure) => {
    failedSinceSample = true
    if (current?.reason !== failure.reason) {
      current = failure
      report.failing(failure)
    }
    return failure
  }

  return {
    failed: (cause) => {
      const failure = describeRedisFailure(cause, connectionError)
      report.count(failure.kind)
      return note(failure)
    },
    connectionFailed: (error, node) => {
      // ioredis also reports its own "stream not writeable" on a connection already known down.
      if (isConnectionDown(error)) return
      connectionError = error
      const failure = describeRedisFailure(error)
      note(node === undefined ? failure : { ...failure, reason: `${failure.reason} (node ${node})` })
    },
    connected: () => {
      connectionError = undefined
    },
    sampled: () => {
      if (current !== undefined && !failedSinceSample) {
        report.answering(current)
        current = undefined
      }
      failedSinceSample = false
    },
    current: () => current
  }
}
