// `npm run graph`: the folder-to-folder imports of src/ with their counts, and the cycles
// between folders with the imports that close them (ModuleGraph.ts says what a node is).
// Exits 1 when there is a cycle.
import { fileURLToPath } from "node:url"
import { cyclesOf, edgesOf, type Edge } from "./ModuleGraph.js"
import { sourceImports } from "./SourceImports.js"

const imports = sourceImports(fileURLToPath(new URL("../../src/", import.meta.url)))

const edges = edgesOf(imports)
const cycles = cyclesOf(edges)
const arrow = (edge: Edge) => `${edge.from} -> ${edge.to} (${edge.imports.length})`

const lines = [`${edges.length} edges between folders of src/ (node -> node, imports):`, ...edges.map((edge) => `  ${arrow(edge)}`), ""]
lines.push(cycles.length === 0 ? "no cycles" : `${cycles.length} cycle(s): nodes that all reach one another, the edges among them and their imports:`)
for (const [i, cycle] of cycles.entries()) {
  lines.push(`cycle ${i + 1}: ${cycle.nodes.join(", ")}`)
  for (const edge of cycle.edges) {
    lines.push(`  ${arrow(edge)}`, ...edge.imports.map(([file, target]) => `      ${file} -> ${target}`))
  }
}
process.stdout.write(`${lines.join("\n")}\n`)
process.exitCode = cycles.length === 0 ? 0 : 1
