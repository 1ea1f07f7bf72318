// Who the client is behind balancers (docs/deploy.md "Behind a load balancer"): the peers
// trusted to report it in `X-Forwarded-For`, and the rule that picks it. Pure.
import { BlockList, isIP } from "node:net"

/** An address written as IPv4 when it is an IPv4-mapped IPv6 one (`::ffff:10.0.0.9`), as sockets give them. */
export const plainAddress = (address: string): string =>
  address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address

const familyOf = (address: string): "ipv4" | "ipv6" | undefined => {
  const version = isIP(address)
  return version === 4 ? "ipv4" : version === 6 ? "ipv6" : undefined
}

const PREFIX = /^\d{1,3}$/

const rangeOf = (entry: string): { readonly address: string; readonly family: "ipv4" | "ipv6"; readonly prefix: number | undefined } | undefined => {
  const slash = entry.indexOf("/")
  const address = plainAddress(slash < 0 ? entry : entry.slice(0, slash))
  const family = familyOf(address)
  if (family === undefined) return undefined
  if (slash < 0) return { address, family, prefix: undefined }
  const prefix = entry.slice(slash + 1)
  if (!PREFIX.test(prefix) || Number(prefix) > (family === "ipv4" ? 32 : 128)) return undefined
  return { address, family, prefix: Number(prefix) }
}

/** `10.0.0.9`, `10.0.0.0/8`, `::1` or `fd00::/8`. */
export const isAddressOrRange = (entry: string): boolean => rangeOf(entry) !== undefined

export interface TrustedProxies {
  /** No peer is trusted: every request's client is its peer. */
  readonly none: boolean
  readonly trusts: (address: string) => boolean
}

/** The trusted list of `trustedProxies`; entries are checked by the config (isAddressOrRange). */
export const trustedProxiesOf = (entries: ReadonlyArray<string>): TrustedProxies => {
  const list = new BlockList()
  for (const entry of entries) {
    const range = rangeOf(entry)
    if (range === undefined) continue
    if (range.prefix === undefined) list.addAddress(range.address, range.family)
    else list.addSubnet(range.address, range.prefix, range.family)
  }
  return {
    none: entries.length === 0,
    trusts: (address) => {
      const family = familyOf(address)
      return family !== undefined && list.check(address, family)
    }
  }
}

/** One `X-Forwarded-For` entry as an address: `[v6]:port` and `v4:port` lose the port; undefined when it is none. */
const forwardedAddress = (entry: string): string | undefined => {
  const text = entry.trim()
  const colon = text.indexOf(":")
  const bare = text.startsWith("[")
    ? text.slice(1, text.includes("]") ? text.indexOf("]") : undefined)
    : colon > 0 && colon === text.lastIndexOf(":")
      ? text.slice(0, colon)
      : text
  const address = plainAddress(bare)
  return familyOf(address) === undefined ? undefined : address
}

/**
 * The client's address. From a peer that is not trusted: the peer. From a trusted one: the
 * right-most `X-Forwarded-For` entry that is not itself trusted; the whole chain trusted, the
 * left-most. An entry that is no address ends the walk: the hop to its right, which put it
 * there, is the client as far as anyone trusted can say.
 */
export const clientAddress = (peer: string, forwardedFor: string | ReadonlyArray<string> | undefined, trusted: TrustedProxies): string => {
  if (trusted.none || forwardedFor === undefined || !trusted.trusts(peer)) return peer
  // Repeated X-Forwarded-For fields are one list, in the order they came (node:http joins them with ", ").
  const entries = (typeof forwardedFor === "string" ? forwardedFor : forwardedFor.join(",")).split(",")
  let client = peer
  for (let i = entries.length - 1; i >= 0; i--) {
    const address = forwardedAddress(entries[i]!)
    if (address === undefined) return client
    client = address
    if (!trusted.trusts(address)) return client
  }
  return client
}
