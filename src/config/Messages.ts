// Turns Schema issues into short lines naming the field (or environment variable),
// what was expected and what was given: `PINBOARD_PORT: expected an integer from 1 to 65535, got "abc"`.
import { ParseResult } from "effect"
import { nearest } from "./Nearest.js"
import { type EnvSource, lookup, SECRET_KEYS } from "./Sources.js"

export const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (out, key, i) => (typeof key === "number" ? `${out}[${key}]` : i === 0 ? String(key) : `${out}.${String(key)}`),
    ""
  ) || "config"

const startsWith = (path: ReadonlyArray<PropertyKey>, prefix: ReadonlyArray<PropertyKey>): boolean =>
  prefix.length <= path.length && prefix.every((key, i) => path[i] === key)

const shown = (path: ReadonlyArray<PropertyKey>, actual: unknown): string => {
  if (path.some((key) => SECRET_KEYS.has(key))) return ""
  if (typeof actual === "number") return `, got ${actual}` // JSON would write Infinity as null
  if (actual === null || typeof actual === "string" || typeof actual === "boolean") return `, got ${JSON.stringify(actual)}`
  return ""
}

/** `is unexpected, expected: "port" | "host"` -> `["port", "host"]` */
const knownKeys = (message: string): Array<string> => [...message.matchAll(/"([^"]*)"/g)].map((m) => m[1]!)

const describeIssue = (issue: ParseResult.ArrayFormatterIssue, input: unknown, sources: ReadonlyArray<EnvSource>): string => {
  const field = formatPath(issue.path)
  switch (issue._tag) {
    case "Unexpected": {
      const known = knownKeys(issue.message)
      const key = issue.path[issue.path.length - 1]
      const near = typeof key === "string" ? nearest(key, known) : undefined
      const hint = near === undefined ? "" : `; did you mean ${formatPath([...issue.path.slice(0, -1), near])}?`
      return `${field}: unknown option${hint}${known.length === 0 ? "" : ` (expected one of: ${known.join(", ")})`}`
    }
    case "Missing":
      return field === "token"
        ? `token: required; set PINBOARD_TOKEN or "token" in the config file`
        : `${field}: required`
  }
  const source = sources.find((s) => startsWith(issue.path, s.envVar.path))
  if (source !== undefined) {
    const expected = source.envVar.expected ?? issue.message
    return `${source.name}: ${expected}${shown(source.envVar.path, source.raw)}`
  }
  if (issue.message.startsWith("expected ")) {
    return `${field}: ${issue.message}${shown(issue.path, lookup(input, issue.path))}`
  }
  // Schema's own wording, `Expected "jwt" | "apikey", actual "oauth"`, in ours.
  const own = /^Expected (.*), actual (.*)$/s.exec(issue.message)
  return own === null ? `${field}: ${issue.message}` : `${field}: expected ${own[1]}, got ${own[2]}`
}

export const describeParseError = (
  error: ParseResult.ParseError,
  input: unknown,
  sources: ReadonlyArray<EnvSource>
): string => {
  const lines = ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => describeIssue(issue, input, sources))
  return [...new Set(lines)].join("\n")
}
