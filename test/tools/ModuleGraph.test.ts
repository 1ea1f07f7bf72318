// The folder graph of `npm run graph` on hand-made import maps: nodes, edges with their
// imports, and the cycles between nodes.
import { describe, expect, it } from "vitest"
import { cyclesOf, edgesOf, nodeOf, relativeImports, resolveImport, type ImportMap } from "../../src/tools/ModuleGraph.js"

const graph = (imports: Record<string, ReadonlyArray<string>>) => {
  const edges = edgesOf(new Map(Object.entries(imports)) satisfies ImportMap)
  return { edges, cycles: cyclesOf(edges) }
}

/** Edges as `from -> to (count)`, the way the CLI prints them. */
const arrows = (edges: ReadonlyArray<{ from: string; to: string; imports: ReadonlyArray<unknown> }>) =>
  edges.map(({ from, to, imports }) => `${from} -> ${to} (${imports.length})`)

describe("nodeOf", () => {
  it("is the folder of a file in a subfolder, and the file itself directly in src/", () => {
    expect(nodeOf("http/Server.ts")).toBe("http")
    expect(nodeOf("http/registry/RegistryApi.ts")).toBe("http/registry")
    expect(nodeOf("pipeline/steps/Depth.ts")).toBe("pipeline/steps")
    expect(nodeOf("Errors.ts")).toBe("Errors.ts")
  })
})

describe("relativeImports and resolveImport", () => {
  it("finds static, type-only, multi-line, re-exported and dynamic relative imports; not packages", () => {
    const source = [
      'import { Effect } from "effect"',
      'import { a } from "./A.js"',
      'import type { B } from "../B.js"',
      "import {",
      "  c,",
      "  d",
      '} from "./sub/C.js"',
      'export { e } from "./E.js"',
      'export * from "../../F.js"',
      'const g = await import("./G.js")',
      'import "./side.js"'
    ].join("\n")
    expect(relativeImports(source)).toEqual(["./A.js", "../B.js", "./sub/C.js", "./E.js", "../../F.js", "./G.js", "./side.js"])
  })

  it("resolves a specifier to the .ts file under src/ it names; outside src/ is undefined", () => {
    expect(resolveImport("http/registry/RegistryApi.ts", "../../Errors.js")).toBe("Errors.ts")
    expect(resolveImport("http/registry/RegistryApi.ts", "../Body.js")).toBe("http/Body.ts")
    expect(resolveImport("main.ts", "./pipeline/steps/Depth.js")).toBe("pipeline/steps/Depth.ts")
    expect(resolveImport("tools/docs.ts", "../../package.json")).toBeUndefined()
  })
})

describe("edgesOf and cyclesOf", () => {
  it("a DAG: edges counted per importing and imported file, sorted; no cycles", () => {
    const { edges, cycles } = graph({
      "main.ts": ["App.ts", "Config.ts"],
      "App.ts": ["http/Server.ts", "Config.ts"],
      "Config.ts": ["Errors.ts"],
      "http/Server.ts": ["Errors.ts", "pipeline/Pipeline.ts", "pipeline/Pipeline.ts"],
      "http/Body.ts": ["Errors.ts"],
      "pipeline/Pipeline.ts": ["Errors.ts", "pipeline/steps/Depth.ts"],
      "pipeline/steps/Depth.ts": ["Errors.ts"],
      "Errors.ts": []
    })
    expect(arrows(edges)).toEqual([
      "App.ts -> Config.ts (1)",
      "App.ts -> http (1)",
      "Config.ts -> Errors.ts (1)",
      "http -> Errors.ts (2)",
      "http -> pipeline (1)",
      "main.ts -> App.ts (1)",
      "main.ts -> Config.ts (1)",
      "pipeline -> Errors.ts (1)",
      "pipeline -> pipeline/steps (1)",
      "pipeline/steps -> Errors.ts (1)"
    ])
    expect(edges.find((edge) => edge.from === "http" && edge.to === "Errors.ts")!.imports).toEqual([
      ["http/Body.ts", "Errors.ts"],
      ["http/Server.ts", "Errors.ts"]
    ])
    expect(cycles).toEqual([])
  })

  it("imports within one folder are no edge, even when they go round", () => {
    const { edges, cycles } = graph({
      "http/Server.ts": ["http/Reply.ts"],
      "http/Reply.ts": ["http/Body.ts"],
      "http/Body.ts": ["http/Server.ts", "Errors.ts"]
    })
    expect(arrows(edges)).toEqual(["http -> Errors.ts (1)"])
    expect(cycles).toEqual([])
  })

  it("a cycle of two: a folder and its subfolder are two nodes", () => {
    const { edges, cycles } = graph({
      "http/Server.ts": ["http/registry/RegistryApi.ts"],
      "http/registry/RegistryApi.ts": ["http/Body.ts", "http/Reply.ts"],
      "http/Body.ts": [],
      "http/Reply.ts": []
    })
    expect(cycles).toEqual([{ nodes: ["http", "http/registry"], edges }])
    expect(arrows(cycles[0]!.edges)).toEqual(["http -> http/registry (1)", "http/registry -> http (2)"])
  })

  it("a cycle of three is one cycle, without the nodes that only lead into or out of it", () => {
    const { cycles } = graph({
      "main.ts": ["proxy/Forward.ts"],
      "proxy/Forward.ts": ["registry/Registry.ts", "Errors.ts"],
      "registry/Registry.ts": ["pipeline/Pipeline.ts"],
      "pipeline/Pipeline.ts": ["proxy/Headers.ts", "Errors.ts"],
      "proxy/Headers.ts": [],
      "Errors.ts": []
    })
    expect(cycles.map((cycle) => ({ nodes: cycle.nodes, edges: arrows(cycle.edges) }))).toEqual([
      {
        nodes: ["pipeline", "proxy", "registry"],
        edges: ["pipeline -> proxy (1)", "proxy -> registry (1)", "registry -> pipeline (1)"]
      }
    ])
  })

  it("two separate cycles, one between files directly in src/, each reported once", () => {
    const { cycles } = graph({
      "App.ts": ["Config.ts"],
      "Config.ts": ["App.ts"],
      "worker/Lease.ts": ["auth/Attestation.ts"],
      "auth/Attestation.ts": ["worker/Epochs.ts"],
      "worker/Epochs.ts": []
    })
    expect(cycles.map((cycle) => cycle.nodes)).toEqual([
      ["App.ts", "Config.ts"],
      ["auth", "worker"]
    ])
  })
})
