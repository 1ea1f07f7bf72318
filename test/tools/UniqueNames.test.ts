// Names in src/ say what a thing is (../shared/STYLE.md "Names"), so one name is one thing: a
// class, interface or type alias is declared in one file only.
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const SRC = fileURLToPath(new URL("../../src/", import.meta.url))
const DECLARATION = /^(?:export\s+)?(?:declare\s+)?(?:abstract\s+)?(?:class|interface|type)\s+([A-Za-z_$][\w$]*)/gm

/** Each declared type-level name with the files that declare it. */
const declarations = (): Map<string, Array<string>> => {
  const files = readdirSync(SRC, { recursive: true, encoding: "utf8" })
    .filter((path) => path.endsWith(".ts"))
    .map((path) => path.split("\\").join("/"))
    .sort()
  const byName = new Map<string, Array<string>>()
  for (const file of files) {
    for (const [, name] of readFileSync(join(SRC, file), "utf8").matchAll(DECLARATION)) {
      const where = byName.get(name!) ?? []
      if (!where.includes(file)) where.push(file)
      byName.set(name!, where)
    }
  }
  return byName
}

describe("type-level names in src/", () => {
  const byName = declarations()
  const twice = [...byName].filter(([, files]) => files.length > 1)

  it("are declared in one file each", () => {
    expect(Object.fromEntries(twice)).toEqual({})
  })

  it("the worker library's and inspect's no longer collide with Pinboard's", () => {
    expect(byName.get("LeaseLost")).toEqual(["Errors.ts"])
    expect(byName.get("UsageError")).toEqual(["cli/CommandLine.ts"])
    expect(byName.get("Admitted")).toEqual(["pipeline/Pipeline.ts"])
    expect(byName.get("Target")).toEqual(["proxy/Target.ts"])
  })
})
