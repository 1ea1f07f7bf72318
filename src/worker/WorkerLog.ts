// The worker library's log lines (docs/worker.md "Logs"): the JSON lines Pinboard writes
// (serving/LogLine.ts), each with the worker's id in `worker`, on stdout unless the `log`
// option takes them. Effect logs of the worker's fibers become such lines; code outside
// Effect (handlers, hooks) logs its failures through `failureLog`.
import { Effect, Logger } from "effect"
import { causeOf, jsonLinesLogger, logLine, type LogLine } from "../serving/LogLine.js"

export type { LogLine }

/** Where the worker's log lines go. */
export type WorkerLog = (line: LogLine) => void

/**
 * `effect` with its Effect logs, those of the fibers it forks and of the finalizers it adds
 * included, written to `write` alone, with the worker's id.
 */
export const withWorkerLog =
  (write: WorkerLog, worker: string) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    effect.pipe(Effect.annotateLogs({ worker }), Effect.provideService(Logger.CurrentLoggers, new Set([jsonLinesLogger(write)])))

/** An error line for a failure outside Effect: the thrown value's stack as `cause`. */
export const failureLog =
  (write: WorkerLog, worker: string, now: () => number) =>
  (message: string, error?: unknown): void =>
    write(logLine(new Date(now()), "error", message, { worker, cause: error === undefined ? undefined : causeOf(error) }))
