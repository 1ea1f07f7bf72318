// Structured logs (docs/operations.md): one JSON object a line on stdout, with `time`,
// `level` and `message` first, then the fields that matter (the log's annotations: namespace,
// id, worker, epoch, status, duration_ms, error). Every Effect log goes through it, at or above
// `log.level`; the access log writes its lines with the same function. The line itself is
// serving/LogLine.ts, which the worker library writes too.
import { Effect, Layer, Logger, type LogLevel, References } from "effect"
import { jsonLinesLogger, logLine, writeToStdout, type LogFields, type LogLevelName } from "../serving/LogLine.js"

export type { LogFields }

/**
 * One log line: the fields after time, level and message; undefined fields are left out.
 * `time` defaults to the moment of writing, which the access log uses; Effect logs pass the
 * date their logger is given, the fiber's Clock.
 */
export const writeLogLine = (level: LogLevelName, message: string, fields: LogFields = {}, time: Date = new Date()): void =>
  writeToStdout(logLine(time, level, message, fields))

const LEVELS: Record<LogLevelName, LogLevel.LogLevel> = {
  debug: "Debug",
  info: "Info",
  warning: "Warn",
  error: "Error"
}

// One instance: a layer provided twice in a fiber adds it to the fiber's loggers once.
const stdoutLines = jsonLinesLogger(writeToStdout)

/** The fiber's loggers, Effect's default logger replaced by the JSON lines (the others, the tracer's, kept). */
const replaceDefaultLogger = (): Layer.Layer<never> =>
  Layer.effect(
    Logger.CurrentLoggers,
    Effect.map(Logger.CurrentLoggers, (loggers) => {
      const replaced = new Set(loggers)
      replaced.delete(Logger.defaultLogger)
      return replaced.add(stdoutLines)
    })
  )

/** Every Effect log as a JSON line, from `level` up. */
export const logLayer = (level: LogLevelName): Layer.Layer<never> =>
  Layer.merge(replaceDefaultLogger(), Layer.succeed(References.MinimumLogLevel, LEVELS[level]))
