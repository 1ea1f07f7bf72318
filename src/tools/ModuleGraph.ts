// The folder-to-folder import graph of src/ and its cycles, pure: from each file's relative
// imports to the edges between nodes and the groups of nodes that import one another.
// A node is a subfolder (`http`, `http/registry`) or, directly in src/, a file of its own
// (`Errors.ts`): src/ holds both the entry points and leaf modules, and one node for all of
// them would put every folder in a cycle. Type-only imports count: they tie two folders
// together for a reader as much as any other. `npm run graph` prints it (graph.ts).
import { posix } from "node:path"

/** Each file (relative to src/, `/`-separated) -> the files it imports, relative to src/ too. */
export type ImportMap = ReadonlyMap<string, ReadonlyArray<string>>

export interface Edge {
  readonly from: string
  readonly to: string
  /** The imports behind it, importing file -> imported file, each pair once. */
  readonly imports: ReadonlyArray<readonly [string, string]>
}

export interface Cycle {
  /** Nodes each of which reaches every other, sorted. */
  readonly nodes: ReadonlyArray<string>
  /** The edges among them. */
  readonly edges: ReadonlyArray<Edge>
}

export const nodeOf = (file: string): string => {
  const folder = posix.dirname(file)
  return folder === "." ? file : folder
}

const SPECIFIER = /\b(?:from|import)\s*\(?\s*["'](\.\.?\/[^"']+)["']/g

/** The relative specifiers of a module's imports and re-exports, static or dynamic. */
export const relativeImports = (source: string): Array<string> => [...source.matchAll(SPECIFIER)].map((match) => match[1]!)

/** The file a specifier names, relative to src/ (`.js` read as the `.ts` it compiles from); undefined outside src/. */
export const resolveImport = (file: string, specifier: string): string | undefined => {
  const target = posix.normalize(posix.join(posix.dirname(file), specifier)).replace(/\.js$/, ".ts")
  return target.startsWith("../") ? undefined : target
}

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/** The edges between distinct nodes, sorted; imports within one node are no edge. */
export const edgesOf = (imports: ImportMap): Array<Edge> => {
  const pairs = new Map<string, Map<string, Array<readonly [string, string]>>>()
  for (const [file, targets] of imports) {
    for (const target of new Set(targets)) {
      const from = nodeOf(file)
      const to = nodeOf(target)
      if (from === to) continue
      const row = pairs.get(from) ?? new Map<string, Array<readonly [string, string]>>()
      pairs.set(from, row)
      row.set(to, [...(row.get(to) ?? []), [file, target] as const])
    }
  }
  return [...pairs]
    .flatMap(([from, row]) => [...row].map(([to, found]) => ({ from, to, imports: found.sort((a, b) => byName(a[0], b[0]) || byName(a[1], b[1])) })))
    .sort((a, b) => byName(a.from, b.from) || byName(a.to, b.to))
}

/** The strongly connected components of more than one node (Tarjan), sorted by first node. */
export const cyclesOf = (edges: ReadonlyArray<Edge>): Array<Cycle> => {
  const successors = new Map<string, Array<string>>()
  for (const { from, to } of edges) {
    successors.set(from, [...(successors.get(from) ?? []), to])
    if (!successors.has(to)) successors.set(to, [])
  }
  const index = new Map<string, number>()
  const lowLink = new Map<string, number>()
  const stack: Array<string> = []
  const components: Array<Array<string>> = []
  const visit = (node: string): void => {
    index.set(node, index.size)
    lowLink.set(node, index.get(node)!)
    stack.push(node)
    for (const to of successors.get(node)!) {
      if (!index.has(to)) {
        visit(to)
        lowLink.set(node, Math.min(lowLink.get(node)!, lowLink.get(to)!))
      } else if (stack.includes(to)) lowLink.set(node, Math.min(lowLink.get(node)!, index.get(to)!))
    }
    if (lowLink.get(node) !== index.get(node)) return
    const component: Array<string> = []
    for (let member = stack.pop()!; ; member = stack.pop()!) {
      component.push(member)
      if (member === node) break
    }
    components.push(component)
  }
  for (const node of successors.keys()) if (!index.has(node)) visit(node)
  return components
    .filter((component) => component.length > 1)
    .map((component) => {
      const nodes = component.sort(byName)
      return { nodes, edges: edges.filter(({ from, to }) => nodes.includes(from) && nodes.includes(to)) }
    })
    .sort((a, b) => byName(a.nodes[0]!, b.nodes[0]!))
}
