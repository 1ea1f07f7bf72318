// Names in src/ say what a thing is (../shared/STYLE.md "Names"), so one name is one thing: a
// class, interface or type alias is declared in one file only, and so is a top-level value (a
// `const`, `let` or `function`, exported or not). A file may give a value and a type one name:
// a Schema and the type it decodes to (`export const Takeover = ...; export type Takeover = ...`).
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const SRC = fileURLToPath(new URL("../../src/", import.meta.url))
const TYPE_LEVEL = /^(?:export\s+)?(?:declare\s+)?(?:abstract\s+)?(?:class|interface|type)\s+([A-Za-z_$][\w$]*)/gm
// Top level only (a declaration at the start of a line): a local inside a function may repeat a name.
const VALUE_LEVEL = /^(?:export\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:const|let|var|function\*?|class|enum)\s+([A-Za-z_$][\w$]*)/gm
/** `const { values: flags } = ...` on one line: the names bound are the identifiers not followed by ":". */
const DESTRUCTURING = /^(?:export\s+)?(?:const|let|var)\s+([{[][^=\n]*[}\]])\s*=/gm
const BOUND = /[A-Za-z_$][\w$]*(?=\s*(?:[,}\]=]|$))/g

const sourceFiles = readdirSync(SRC, { recursive: true, encoding: "utf8" })
  .filter((path) => path.endsWith(".ts"))
  .map((path) => path.split("\\").join("/"))
  .sort()

/** Each name `namesIn` finds declared, with the files that declare it. */
const declarations = (namesIn: (source: string) => Iterable<string>): Map<string, Array<string>> => {
  const byName = new Map<string, Array<string>>()
  for (const file of sourceFiles) {
    for (const name of namesIn(readFileSync(join(SRC, file), "utf8"))) {
      const where = byName.get(name) ?? []
      if (!where.includes(file)) where.push(file)
      byName.set(name, where)
    }
  }
  return byName
}

const matches = (pattern: RegExp) => (source: string) => [...source.matchAll(pattern)].map(([, name]) => name!)
const valueNames = (source: string) => [
  ...matches(VALUE_LEVEL)(source),
  ...[...source.matchAll(DESTRUCTURING)].flatMap(([, binding]) => binding!.match(BOUND) ?? [])
]

const typeLevel = declarations(matches(TYPE_LEVEL))
const valueLevel = declarations(valueNames)
const anyLevel = declarations((source) => new Set([...matches(TYPE_LEVEL)(source), ...valueNames(source)]))

const twice = (byName: Map<string, Array<string>>) => Object.fromEntries([...byName].filter(([, files]) => files.length > 1))

describe("type-level names in src/", () => {
  it("are declared in one file each", () => {
    expect(twice(typeLevel)).toEqual({})
  })

  it("the worker library's and inspect's no longer collide with Pinboard's", () => {
    expect(typeLevel.get("LeaseLost")).toEqual(["Errors.ts"])
    expect(typeLevel.get("UsageError")).toEqual(["cli/CommandLine.ts"])
    expect(typeLevel.get("Admitted")).toEqual(["pipeline/Pipeline.ts"])
    expect(typeLevel.get("Target")).toEqual(["proxy/Target.ts"])
  })
})

describe("value-level names in src/", () => {
  it("are declared in one file each, exported or not", () => {
    expect(twice(valueLevel)).toEqual({})
  })

  it("name no type of another file: a value and a type share a name in one file only", () => {
    expect(twice(anyLevel)).toEqual({})
  })

  it("are read from every kind of top-level declaration", () => {
    expect(valueLevel.get("flags")).toEqual(["demo/worker.ts"])
    expect(valueLevel.get("Registry")).toEqual(["registry/Registry.ts"])
    expect(valueLevel.get("makeRegistry")).toEqual(["registry/RegistryOnBackend.ts"])
    expect(anyLevel.get("Takeover")).toEqual(["config/Fields.ts"])
  })

  it("the registry's clock samples under its own name, the catalogue's rows under theirs", () => {
    expect(valueLevel.get("CLOCK_SAMPLE_EVERY_MS")).toEqual(["registry/RegistryClock.ts"])
    expect(anyLevel.get("NotPlaced")).toEqual(["Errors.ts"])
    expect(anyLevel.get("Provider")).toEqual(["auth/Providers.ts"])
    expect(anyLevel.get("Env")).toEqual(["config/Sources.ts"])
    expect(anyLevel.get("RegisterAnswer")).toEqual(["registry/Registry.ts"])
  })
})
