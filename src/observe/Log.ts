// Structured logs (docs/operations.md): one JSON object a line on stdout, with `time`,
// `level` and `message` first, then the fields that matter (the log's annotations: namespace,
// id, worker, epoch, status, duration_ms, error). Every Effect log goes through it, at or above
// `log.level`; the access log writes its lines with the same function.
import { Cause, HashMap, Layer, Logger, LogLevel } from "effect"
import type { LogLevelName } from "../config/Fields.js"

export type Fields = Readonly<Record<string, unknown>>

/**
 * One log line: the fields after time, level and message; undefined fields are left out.
 * `time` defaults to the moment of writing, which the access log uses; Effect logs pass the
 * date their logger is given, the fiber's Clock.
 */
export const writeLogLine = (level: LogLevelName, message: string, fields: Fields = {}, time: Date = new Date()): void => {
  process.stdout.write(`${JSON.stringify({ time: time.toISOString(), level, message, ...fields })}\n`)
}

const LEVELS: Record<LogLevelName, LogLevel.LogLevel> = {
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warning: LogLevel.Warning,
  error: LogLevel.Error
}

const nameOf = (level: LogLevel.LogLevel): LogLevelName =>
  level._tag === "Debug" || level._tag === "Trace" || level._tag === "All"
    ? "debug"
    : level._tag === "Info"
      ? "info"
      : level._tag === "Warning"
        ? "warning"
        : "error"

const textOf = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  return parts.map((part) => (typeof part === "string" ? part : JSON.stringify(part))).join(" ")
}

const jsonLines = Logger.make(({ logLevel, message, annotations, cause, date }) => {
  const fields: Record<string, unknown> = Object.fromEntries(HashMap.toEntries(annotations))
  if (!Cause.isEmpty(cause)) fields["cause"] = Cause.pretty(cause, { renderErrorCause: true })
  writeLogLine(nameOf(logLevel), textOf(message), fields, date)
})

/** Every Effect log as a JSON line, from `level` up. */
export const logLayer = (level: LogLevelName): Layer.Layer<never> =>
  Layer.merge(Logger.replace(Logger.defaultLogger, jsonLines), Logger.minimumLogLevel(LEVELS[level]))
