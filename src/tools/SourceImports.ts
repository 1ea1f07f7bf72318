// Every TypeScript file under a source folder with the files it imports (relative imports
// only), as ModuleGraph.ts takes them.
import { readdirSync, readFileSync } from "node:fs"
import { join, sep } from "node:path"
import { relativeImports, resolveImport, type ImportMap } from "./ModuleGraph.js"

export const sourceImports = (dir: string): ImportMap => {
  const files = readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((path) => path.endsWith(".ts"))
    .map((path) => path.split(sep).join("/"))
    .sort()
  return new Map(
    files.map((file) => [file, relativeImports(readFileSync(join(dir, file), "utf8")).flatMap((specifier) => resolveImport(file, specifier) ?? [])])
  )
}
