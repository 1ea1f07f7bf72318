// One log line as Pinboard and the worker library both write it (docs/operations.md "Logs"):
// a JSON object with `time` (ISO 8601, UTC), `level` and `message` first, then the fields that
// matter (worker, namespace, id, epoch, status, duration_ms, cause...); undefined fields are
// left out. An Effect log becomes such a line with its annotations as the fields.
import { Cause, Logger, type LogLevel, References } from "effect"

export type LogLevelName = "debug" | "info" | "warning" | "error"

export interface LogLine {
  readonly time: string
  readonly level: LogLevelName
  readonly message: string
  readonly [field: string]: unknown
}

export type LogFields = Readonly<Record<string, unknown>>

export const logLine = (time: Date, level: LogLevelName, message: string, fields: LogFields = {}): LogLine => ({
  time: time.toISOString(),
  level,
  message,
  ...fields
})

/** The default destination of both: one JSON object a line on stdout. */
export const writeToStdout = (line: LogLine): void => {
  process.stdout.write(`${JSON.stringify(line)}\n`)
}

/** A thrown value as a line's `cause`: the stack when there is one. */
export const causeOf = (error: unknown): string => (error instanceof Error ? (error.stack ?? error.message) : String(error))

export const levelName = (level: LogLevel.LogLevel): LogLevelName =>
  level === "Debug" || level === "Trace" || level === "All"
    ? "debug"
    : level === "Info"
      ? "info"
      : level === "Warn"
        ? "warning"
        : "error"

const textOf = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  return parts.map((part) => (typeof part === "string" ? part : JSON.stringify(part))).join(" ")
}

/** Every Effect log it gets, as a line given to `write`; the time is the one the fiber's Clock gave the log. */
export const jsonLinesLogger = (write: (line: LogLine) => void): Logger.Logger<unknown, void> =>
  Logger.make(({ logLevel, message, cause, date, fiber }) => {
    const fields: Record<string, unknown> = { ...fiber.getRef(References.CurrentLogAnnotations) }
    // Cause.pretty renders each error's own `cause` chain too.
    if (cause.reasons.length > 0) fields["cause"] = Cause.pretty(cause)
    write(logLine(date, levelName(logLevel), textOf(message), fields))
  })
