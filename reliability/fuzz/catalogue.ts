// What Pinboard may answer: the catalogue rows of docs/errors.md (read from the page, not from
// src/Errors.ts, so the fuzz checks the documented contract), the registry API's own answers,
// the probes, Node's HTTP-layer rejections, bare upgrade status lines, and the worker's answers
// relayed (marked by `X-Accel-Buffering: no`, which Pinboard sets on every relayed response).
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { ROOT } from "./fleet.js"
import { header, type Response } from "./wire.js"

export interface Row {
  readonly name: string
  readonly status: number
  /** undefined: an example body (InvalidRequest), checked by shape. */
  readonly body: string | undefined
  readonly contentType: string | undefined
}

/** The rows of docs/errors.md's table. */
export const loadCatalogue = (): ReadonlyArray<Row> => {
  const page = readFileSync(join(ROOT, "docs/errors.md"), "utf8")
  const rows: Array<Row> = []
  for (const line of page.split("\n")) {
    if (!line.startsWith("| ") || line.startsWith("| Error") || line.startsWith("|---")) continue
    const cells = line.split(" | ").map((c) => c.replace(/^\| ?/, "").trim())
    const [name, status, body, contentType] = cells
    if (name === undefined || status === undefined || body === undefined || !/^\d{3}$/.test(status)) continue
    if (name === "(defect)") continue // the 500: never an acceptable answer
    const literal = body.startsWith("`") && body.endsWith("`") ? body.slice(1, -1) : body === "(empty)" ? "" : undefined
    rows.push({
      name,
      status: Number(status),
      body: name === "InvalidRequest" ? undefined : literal,
      contentType: contentType === "" || contentType === undefined ? undefined : contentType
    })
  }
  if (rows.length < 20) throw new Error(`docs/errors.md: only ${rows.length} catalogue rows found`)
  return rows
}

export interface Context {
  /** The request's method, as far as the input knows it. */
  readonly method: string
  /** The request's path, as far as the input knows it. */
  readonly path: string
  /** The request was a WebSocket (or other) upgrade. */
  readonly upgrade: boolean
}

export type Kind = "worker" | "upgrade" | "catalogue" | "registry" | "probe" | "node" | "bare" | "unknown"

export interface Classified {
  readonly kind: Kind
  /** e.g. `worker 200`, `IdEmpty`, `node 400`, `bare 401`, `registry 409`. */
  readonly label: string
  /** For `unknown`: why nothing matched. */
  readonly why?: string
}

const isJsonObject = (body: Buffer): Record<string, unknown> | undefined => {
  try {
    const value: unknown = JSON.parse(body.toString("utf8"))
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

/** Node's own rejections of malformed input (node:http `socketOnError`): a status line and `Connection: close`. */
const NODE_REJECTIONS = new Set([400, 408, 413, 431])

const BARE_HEADERS = new Set(["retry-after", "connection"])

export const makeClassifier = (rows: ReadonlyArray<Row>) => {
  const byStatus = new Map<number, Array<Row>>()
  for (const row of rows) byStatus.set(row.status, [...(byStatus.get(row.status) ?? []), row])

  const catalogueRow = (response: Response, head: boolean): Row | undefined => {
    const candidates = byStatus.get(response.status) ?? []
    const contentType = header(response, "content-type")
    for (const row of candidates) {
      if (row.contentType !== contentType) continue
      if (head) {
        if (row.body === undefined || header(response, "content-length") === String(Buffer.byteLength(row.body))) return row
        continue
      }
      const body = response.body.toString("utf8")
      if (row.body !== undefined) {
        if (body === row.body) return row
      } else {
        // InvalidRequest: {"error":"<field>: <what was expected>"} (a field may be named "" or hold a colon)
        const json = isJsonObject(response.body)
        if (json !== undefined && Object.keys(json).length === 1 && typeof json.error === "string" && /: [a-z].*$/.test(json.error)) {
          if (body === JSON.stringify({ error: json.error })) return row
        }
      }
    }
    return undefined
  }

  return (response: Response, context: Context): Classified => {
    const head = context.method === "HEAD"
    if (response.status === 101) {
      return header(response, "x-worker-upgrade") === "yes"
        ? { kind: "upgrade", label: "upgrade 101" }
        : { kind: "unknown", label: "101", why: "a 101 without the worker's marker header" }
    }
    if (header(response, "x-accel-buffering") === "no") return { kind: "worker", label: `worker ${response.status}` }

    // Bare status lines: upgrade failures (Pinboard's, or the worker's non-101 relayed).
    if (context.upgrade && response.unframed && response.body.length === 0 && response.headers.every(([n]) => BARE_HEADERS.has(n))) {
      const retryAfter = header(response, "retry-after")
      if (response.status === 503 && retryAfter === undefined) return { kind: "unknown", label: "bare 503", why: "a bare 503 without Retry-After" }
      return { kind: "bare", label: `bare ${response.status}` }
    }
    // Node's rejections of malformed requests, before Pinboard sees them.
    if (NODE_REJECTIONS.has(response.status) && response.unframed && response.body.length === 0) {
      const names = response.headers.map(([n]) => n)
      if (names.length === 1 && names[0] === "connection" && header(response, "connection")!.toLowerCase() === "close") {
        return { kind: "node", label: `node ${response.status}` }
      }
    }
    // node:http answers an unknown Expect by itself (no checkExpectation listener): 417, empty.
    if (response.status === 417 && response.body.length === 0) return { kind: "node", label: "node 417" }

    const row = catalogueRow(response, head)
    if (row !== undefined) return { kind: "catalogue", label: row.name }

    const path = context.path
    const json = isJsonObject(response.body)
    if (path === "/healthz" || path.startsWith("/healthz?") || path === "/readyz" || path.startsWith("/readyz?")) {
      if (response.status === 200 && (head || (json !== undefined && (json.status === "ok" || json.status === "ready")))) {
        return { kind: "probe", label: "probe 200" }
      }
    }
    if (path === "/registry" || path.startsWith("/registry/") || path.startsWith("/registry?")) {
      if (response.status === 204 && response.body.length === 0) return { kind: "registry", label: "registry 204" }
      if (response.status === 200 && (head || json !== undefined)) return { kind: "registry", label: "registry 200" }
      if (response.status === 409 && json !== undefined && (json.released === false || json.tagged === false)) {
        return { kind: "registry", label: "registry 409" }
      }
    }
    return {
      kind: "unknown",
      label: `${response.status}`,
      why: `${response.status} ${JSON.stringify(response.headers)} ${JSON.stringify(response.body.subarray(0, 200).toString("latin1"))}`
    }
  }
}

export type Classifier = ReturnType<typeof makeClassifier>
