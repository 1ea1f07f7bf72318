// Turns Schema issues into short lines naming the field (or environment variable),
// what was expected and what was given: `PINBOARD_PORT: expected an integer from 1 to 65535, got "abc"`.
// The "expected …" halves are the schemas' message annotations (config/Fields.ts `expected`, `expectedShape`).
import { SchemaAST, SchemaIssue } from "effect"
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

/** One problem at one place: an option the schema does not have, one it needs, or a value it refuses. */
type Problem =
  | { readonly _tag: "Unexpected"; readonly path: ReadonlyArray<PropertyKey>; readonly known: ReadonlyArray<string> }
  | { readonly _tag: "Missing"; readonly path: ReadonlyArray<PropertyKey> }
  | {
    readonly _tag: "Invalid"
    readonly path: ReadonlyArray<PropertyKey>
    readonly message: string
    /** What was given, shown whatever it is (a list or an object too). */
    readonly given?: string
  }

type Annotations = SchemaAST.AST["annotations"]

const messageIn = (annotations: Annotations, override: boolean): string | undefined => {
  const message = annotations?.["message"]
  return typeof message === "string" && (!override || annotations?.["override"] === true) ? message : undefined
}

/** The annotations of a node and of its checks, the node's own first. */
const annotationsOf = (ast: SchemaAST.AST): ReadonlyArray<Annotations> => [ast.annotations, ...(ast.checks ?? []).map((check) => check.annotations)]

/** A leaf's message (`expected`): it stands for every failure of the value under it. */
const overrideOf = (ast: SchemaAST.AST): string | undefined => {
  for (const annotations of annotationsOf(ast)) {
    const message = messageIn(annotations, true)
    if (message !== undefined) return message
  }
  return undefined
}

/** A container's own message (`expectedShape`), for a value that is not that container at all. */
const shapeOf = (ast: SchemaAST.AST): string | undefined => {
  for (const annotations of annotationsOf(ast)) {
    const message = messageIn(annotations, false)
    if (message !== undefined) return message
  }
  return undefined
}

/** Schema's own wording, where no annotation says more: `Expected string` -> `expected string`. */
const ownWording = (issue: SchemaIssue.Leaf): string => SchemaIssue.defaultLeafHook(issue).replace(/^Expected /, "expected ")

const optionNames = (ast: SchemaAST.AST): ReadonlyArray<string> =>
  SchemaAST.isObjects(ast) ? ast.propertySignatures.map((property) => String(property.name)) : []

/**
 * A union of objects told apart by one key's literal (`"type": "jwt"` or `"apikey"`) that no
 * member took: that key is missing or names no member. Undefined when the union is not one.
 */
const discriminant = (
  ast: SchemaAST.Union,
  input: unknown,
  path: ReadonlyArray<PropertyKey>
): Problem | undefined => {
  if (typeof input !== "object" || input === null) return undefined
  const literalsOf = (member: SchemaAST.AST): Map<string, SchemaAST.LiteralValue> =>
    new Map(
      SchemaAST.isObjects(member)
        ? member.propertySignatures.flatMap((p) => (SchemaAST.isLiteral(p.type) ? [[String(p.name), p.type.literal] as const] : []))
        : []
    )
  const members = ast.types.map(literalsOf)
  const key = [...(members[0]?.keys() ?? [])].find((name) => members.every((literals) => literals.has(name)))
  if (key === undefined) return undefined
  if (!(key in input)) return { _tag: "Missing", path: [...path, key] }
  const expected = members.map((literals) => JSON.stringify(literals.get(key))).join(" | ")
  return { _tag: "Invalid", path: [...path, key], message: `expected ${expected}`, given: compact((input as Record<string, unknown>)[key]) }
}

/** A JSON value on one line, numbers as JavaScript writes them (Infinity, which JSON cannot). */
const compact = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(compact).join(",")}]`
  if (typeof value === "object" && value !== null) {
    return `{${Object.entries(value).map(([key, item]) => `${JSON.stringify(key)}:${compact(item)}`).join(",")}}`
  }
  return typeof value === "string" ? JSON.stringify(value) : String(value)
}

/** Every problem of an issue tree, in its order; `input` is the value at `path`. */
const problemsOf = (issue: SchemaIssue.Issue, path: ReadonlyArray<PropertyKey>, input: unknown, out: Array<Problem>): void => {
  const invalid = (message: string) => out.push({ _tag: "Invalid", path, message })
  switch (issue._tag) {
    case "Pointer":
      return problemsOf(issue.issue, [...path, ...issue.path], lookup(input, issue.path), out)
    case "MissingKey":
      return void out.push({ _tag: "Missing", path })
    case "UnexpectedKey":
      return void out.push({ _tag: "Unexpected", path, known: optionNames(issue.ast) })
    case "InvalidType":
      return void invalid(overrideOf(issue.ast) ?? shapeOf(issue.ast) ?? ownWording(issue))
    case "InvalidValue":
    case "Forbidden":
      return void invalid(messageIn(issue.annotations, false) ?? ownWording(issue))
    case "OneOf":
      return void invalid(overrideOf(issue.ast) ?? ownWording(issue))
    case "Filter": {
      // The check's own message, or else what it reported (a message, or problems at paths under it).
      const message = messageIn(issue.filter.annotations, false)
      return message === undefined ? problemsOf(issue.issue, path, input, out) : void invalid(message)
    }
    case "Encoding":
    case "Composite": {
      const message = overrideOf(issue.ast)
      if (message !== undefined) return void invalid(message)
      if (issue._tag === "Encoding") return problemsOf(issue.issue, path, input, out)
      return issue.issues.forEach((inner) => problemsOf(inner, path, input, out))
    }
    case "AnyOf": {
      const message = overrideOf(issue.ast)
      if (message !== undefined) return void invalid(message)
      if (issue.issues.length > 0) return issue.issues.forEach((inner) => problemsOf(inner, path, input, out))
      const problem = discriminant(issue.ast, input, path)
      if (problem !== undefined) return void out.push(problem)
      return void invalid(shapeOf(issue.ast) ?? ownWording(new SchemaIssue.InvalidType(issue.ast)))
    }
  }
}

const describeProblem = (problem: Problem, input: unknown, sources: ReadonlyArray<EnvSource>): string => {
  const field = formatPath(problem.path)
  switch (problem._tag) {
    case "Unexpected": {
      const { known } = problem
      const key = problem.path[problem.path.length - 1]
      const near = typeof key === "string" ? nearest(key, known) : undefined
      const hint = near === undefined ? "" : `; did you mean ${formatPath([...problem.path.slice(0, -1), near])}?`
      return `${field}: unknown option${hint}${known.length === 0 ? "" : ` (expected one of: ${known.join(", ")})`}`
    }
    case "Missing":
      return `${field}: required`
  }
  const source = sources.find((s) => startsWith(problem.path, s.envVar.path))
  if (source !== undefined) {
    const expected = source.envVar.expected ?? problem.message
    return `${source.name}: ${expected}${shown(source.envVar.path, source.raw)}`
  }
  if (problem.message.startsWith("expected ")) {
    const given = problem.given === undefined ? shown(problem.path, lookup(input, problem.path)) : `, got ${problem.given}`
    return `${field}: ${problem.message}${given}`
  }
  return `${field}: ${problem.message}`
}

/** One line per problem, each once, for the configuration `input` (environment and flags laid over the file) refused with `issue`. */
export const describeParseError = (issue: SchemaIssue.Issue, input: unknown, sources: ReadonlyArray<EnvSource>): string => {
  const problems: Array<Problem> = []
  problemsOf(issue, [], input, problems)
  const lines = problems.map((problem) => describeProblem(problem, input, sources))
  return [...new Set(lines)].join("\n")
}
