// Where a forward goes (docs/proxy.md): the worker's advertiseUrl origin, its path prefix, then
// the raw path and query byte for byte.
import { formatAddress, type Address } from "../Address.js"

/** An advertiseUrl, parsed: where its forwards go and the path they go under. */
interface AdvertisedUrl {
  readonly origin: string
  readonly prefix: string
}

/** advertiseUrls parsed once; few and long-lived (one per worker), so a small cap suffices. */
const parsed = new Map<string, AdvertisedUrl>()
const MAX_CACHED = 4096

const parse = (advertiseUrl: string): AdvertisedUrl => {
  let upstream = parsed.get(advertiseUrl)
  if (upstream === undefined) {
    if (parsed.size >= MAX_CACHED) parsed.clear()
    const url = new URL(advertiseUrl)
    upstream = { origin: url.origin, prefix: url.pathname.endsWith("/") ? url.pathname.slice(0, -1) : url.pathname }
    parsed.set(advertiseUrl, upstream)
  }
  return upstream
}

export interface Target {
  readonly origin: string
  readonly path: string
}

export const targetOf = (advertiseUrl: string, address: Address): Target => {
  const { origin, prefix } = parse(advertiseUrl)
  return { origin, path: `${prefix}${formatAddress(address)}` }
}
