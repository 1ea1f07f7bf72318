// The shape of src/ (docs/architecture.md): imports run one way between folders, the two leaf
// folders (contract/, serving/) import nothing of Pinboard's, and the worker library imports
// nothing but them.
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { cyclesOf, edgesOf } from "../../src/tools/ModuleGraph.js"
import { sourceImports } from "../../src/tools/SourceImports.js"

const edges = edgesOf(sourceImports(fileURLToPath(new URL("../../src/", import.meta.url))))
const from = (node: string) => edges.filter((edge) => edge.from === node).map((edge) => `${edge.to} (${edge.imports.map(([file]) => file).join(", ")})`)

describe("the module graph of src/", () => {
  it("has no cycle between folders", () => {
    expect(cyclesOf(edges).map((cycle) => cycle.edges.map((edge) => `${edge.from} -> ${edge.to}`))).toEqual([])
  })

  it("contract/ and serving/ import no other folder or file of src/", () => {
    expect({ contract: from("contract"), serving: from("serving") }).toEqual({ contract: [], serving: [] })
  })

  it("worker/ (the worker library) imports only contract/ and serving/", () => {
    expect(edges.filter((edge) => edge.from === "worker").map((edge) => edge.to)).toEqual(["contract", "serving"])
  })
})
