// Which handler serves a request (docs/worker.md "Instances"): `"METHOD /path"`, then
// `"* /path"`, then HEAD from the GET route (node's ServerResponse sends no body for a HEAD
// request), then the definition's `fetch`. Failing all of them, a path routed for other methods
// is answered 405 with `Allow` (RFC 9110, section 15.5.6), any other 404.
import type { ServerResponse } from "node:http"
import type { InstanceDefinition, RouteHandler } from "./Definition.js"

export type RouteMatch<S> =
  | { readonly _tag: "Route"; readonly handler: RouteHandler<S>; readonly headFromGet: boolean }
  | { readonly _tag: "MethodNotAllowed"; readonly allow: string }
  | { readonly _tag: "NotFound" }

const NOT_FOUND = { _tag: "NotFound" } as const

/** Path to the methods routed for it (`*` routes none in particular), in the routes' order. */
const methodsByPath = new WeakMap<InstanceDefinition<any>, ReadonlyMap<string, ReadonlyArray<string>>>()

const methodsOf = (definition: InstanceDefinition<unknown>): ReadonlyMap<string, ReadonlyArray<string>> => {
  let byPath = methodsByPath.get(definition)
  if (byPath === undefined) {
    const built = new Map<string, Array<string>>()
    for (const key of Object.keys(definition.routes ?? {})) {
      const space = key.indexOf(" ")
      const method = key.slice(0, space)
      const path = key.slice(space + 1)
      if (method !== "*") built.set(path, [...(built.get(path) ?? []), method])
    }
    byPath = built
    methodsByPath.set(definition, byPath)
  }
  return byPath
}

/** The `Allow` value: the routed methods, with HEAD beside a GET that has none of its own. */
const allowOf = (methods: ReadonlyArray<string>): string =>
  (methods.includes("GET") && !methods.includes("HEAD") ? [...methods, "HEAD"] : methods).join(", ")

export const matchRoute = <S>(definition: InstanceDefinition<S>, method: string, path: string): RouteMatch<S> => {
  const routes = definition.routes
  const exact = routes?.[`${method} ${path}`] ?? routes?.[`* ${path}`]
  if (exact !== undefined) return { _tag: "Route", handler: exact, headFromGet: false }
  const get = method === "HEAD" ? routes?.[`GET ${path}`] : undefined
  if (get !== undefined) return { _tag: "Route", handler: get, headFromGet: true }
  if (definition.fetch !== undefined) return { _tag: "Route", handler: definition.fetch, headFromGet: false }
  const methods = methodsOf(definition as InstanceDefinition<unknown>).get(path)
  return methods === undefined ? NOT_FOUND : { _tag: "MethodNotAllowed", allow: allowOf(methods) }
}

/**
 * For HEAD served by the GET route: the `Content-Length` node would have computed for GET's
 * `res.end(body)`, which it leaves out of a HEAD answer. A length the handler set is kept as
 * it is, and a body written in pieces has none (GET would be chunked).
 */
export const keepGetLength = (res: ServerResponse): void => {
  const end = res.end.bind(res) as (...args: Array<unknown>) => ServerResponse
  const write = res.write.bind(res) as (...args: Array<unknown>) => boolean
  let written = false
  res.write = ((...args: Array<unknown>) => {
    written = true
    return write(...args)
  }) as ServerResponse["write"]
  res.end = ((...args: Array<unknown>) => {
    const [chunk, encoding] = args
    if (!written && !res.headersSent && !res.hasHeader("content-length") && !res.hasHeader("transfer-encoding")) {
      if (typeof chunk === "string") res.setHeader("content-length", Buffer.byteLength(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8"))
      else if (chunk instanceof Uint8Array) res.setHeader("content-length", chunk.byteLength)
    }
    return end(...args)
  }) as ServerResponse["end"]
}
