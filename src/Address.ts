// Raw request target -> namespace, id, rest, query (docs/proxy.md
// "Addressing").
// On the hot path: one pass of index scans over the raw string, no regex, no split.
import { Result } from "effect"
import { IdBadCharacters, IdEmpty, IdTooLong, UnknownNamespace } from "./Errors.js"

export interface Address {
  /** With the leading slash, e.g. `"/threads"`. */
  readonly namespace: string
  readonly id: string
  /** Everything after the id segment, byte for byte: `""` or starting with `/`. */
  readonly rest: string
  /** Raw, including the `?`: `""` or starting with `?`. */
  readonly query: string
}

export type IdError = IdEmpty | IdTooLong | IdBadCharacters
export type AddressError = IdError | UnknownNamespace

export const MAX_ID_LENGTH = 256
export const MAX_NAMESPACE_NAME_LENGTH = 128

/** Documentation and schemas; the parser itself uses the table below. */
export const ID_PATTERN = /^[A-Za-z0-9._~-]{1,256}$/
/** A namespace as spelled everywhere (docs/protocol.md): with the leading slash. */
export const NAMESPACE_PATTERN = /^\/[A-Za-z0-9._~-]{1,128}$/

// 1 for each code unit of [A-Za-z0-9._~-]; everything else (including `%` and
// anything >= 128) is outside the set.
const UNRESERVED = new Uint8Array(128)
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-") {
  UNRESERVED[c.charCodeAt(0)] = 1
}

const allUnreserved = (s: string, from: number, to: number): boolean => {
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i)
    if (c >= 128 || UNRESERVED[c] === 0) return false
  }
  return true
}

// Checks in the order of docs/proxy.md "Check order": empty, length, characters. Lengths count UTF-16
// code units; Node decodes req.url as latin1, so that is also the byte count.
const idErrorAt = (s: string, from: number, to: number): IdError | undefined =>
  to === from
    ? new IdEmpty()
    : to - from > MAX_ID_LENGTH
    ? new IdTooLong()
    : allUnreserved(s, from, to)
    ? undefined
    : new IdBadCharacters()

/** Why `id` is not a valid instance id, or `undefined` when it is. */
export const idError = (id: string): IdError | undefined => idErrorAt(id, 0, id.length)

export const isValidId = (id: string): boolean => idErrorAt(id, 0, id.length) === undefined

const isNamespaceNameAt = (s: string, from: number, to: number): boolean =>
  to > from && to - from <= MAX_NAMESPACE_NAME_LENGTH && allUnreserved(s, from, to)

/** `namespace` with its leading slash, e.g. `"/threads"`. */
export const isValidNamespace = (namespace: string): boolean =>
  namespace.charCodeAt(0) === 0x2f /* / */ && isNamespaceNameAt(namespace, 1, namespace.length)

// Absolute-form (`http://host:port/path?q`, RFC 9112 3.2.2): index where the
// authority starts (after `scheme://`), or -1 when the target is not absolute-form
// (origin-form, `*`, authority-form).
const absoluteFormAuthorityStart = (url: string): number => {
  const colon = url.indexOf(":")
  if (colon < 1 || url.charCodeAt(colon + 1) !== 0x2f || url.charCodeAt(colon + 2) !== 0x2f) return -1
  for (let i = 0; i < colon; i++) {
    const c = url.charCodeAt(i)
    const alpha = (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)
    if (!(alpha || (i > 0 && ((c >= 0x30 && c <= 0x39) || c === 0x2b || c === 0x2d || c === 0x2e)))) return -1
  }
  return colon + 3
}

/** Where the authority that starts at `from` ends: the path, the query, the fragment or the end. */
const authorityEnd = (url: string, from: number): number => {
  for (let i = from; i < url.length; i++) {
    const c = url.charCodeAt(i)
    if (c === 0x2f /* / */ || c === 0x3f /* ? */ || c === 0x23 /* # */) return i
  }
  return url.length
}

// Index where an absolute-form target's path starts, or -1 when there is no path
// (`http://host`, `http://host?q`) or the target is not absolute-form.
const absoluteFormPathStart = (url: string): number => {
  const from = absoluteFormAuthorityStart(url)
  if (from < 0) return -1
  const end = authorityEnd(url, from)
  return url.charCodeAt(end) === 0x2f ? end : -1
}

/**
 * The host and port an absolute-form target names (`b.example:8080` in
 * `http://user@b.example:8080/x`), which RFC 9112 3.2.2 puts before `Host`;
 * undefined for any other form.
 */
export const absoluteFormAuthority = (rawUrl: string): string | undefined => {
  if (rawUrl.charCodeAt(0) === 0x2f) return undefined
  const from = absoluteFormAuthorityStart(rawUrl)
  if (from < 0) return undefined
  const authority = rawUrl.slice(from, authorityEnd(rawUrl, from))
  return authority.slice(authority.lastIndexOf("@") + 1)
}

/**
 * Parse Node's `req.url` (raw, undecoded). The id is checked before anything
 * else; a first segment that no worker could have registered then gives
 * `UnknownNamespace`, as does a path with no id segment (`/ns`, `/ns/`).
 */
export const parseAddress = (rawUrl: string): Result.Result<Address, AddressError> => {
  const start = rawUrl.charCodeAt(0) === 0x2f ? 0 : absoluteFormPathStart(rawUrl)
  if (start < 0) return Result.fail(new UnknownNamespace())

  const q = rawUrl.indexOf("?", start)
  const pathEnd = q < 0 ? rawUrl.length : q

  // `/ns` or `/ns/`: no id segment.
  const nsEnd = rawUrl.indexOf("/", start + 1)
  if (nsEnd < 0 || nsEnd + 1 >= pathEnd) return Result.fail(new UnknownNamespace())

  const idStart = nsEnd + 1
  let idEnd = rawUrl.indexOf("/", idStart)
  if (idEnd < 0 || idEnd > pathEnd) idEnd = pathEnd

  const bad = idErrorAt(rawUrl, idStart, idEnd)
  if (bad !== undefined) return Result.fail(bad)
  if (!isNamespaceNameAt(rawUrl, start + 1, nsEnd)) return Result.fail(new UnknownNamespace())

  return Result.succeed({
    namespace: rawUrl.slice(start, nsEnd),
    id: rawUrl.slice(idStart, idEnd),
    rest: rawUrl.slice(idEnd, pathEnd),
    query: q < 0 ? "" : rawUrl.slice(q)
  })
}

/** A raw target's path: everything before the query. */
export const pathOf = (rawUrl: string): string => {
  const query = rawUrl.indexOf("?")
  return query === -1 ? rawUrl : rawUrl.slice(0, query)
}

/** The origin-form target of an address: `namespace + "/" + id + rest + query`. */
export const formatAddress = (address: Address): string =>
  `${address.namespace}/${address.id}${address.rest}${address.query}`
