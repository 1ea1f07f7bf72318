// Step 5, hostname binding (docs/proxy.md "Hostname-aware mode"): which hostname the
// request belongs to. In hostname-aware mode the `Host` header names it (or an absolute-form
// target's authority), lowercased and with the port stripped; none is `400 missing Host
// header`. The env is the (hostname, namespace) binding's, which the registry finds at
// resolve (an unbound pair: `404 unknown namespace`).
// Outside hostname-aware mode every request has the empty hostname.
import type { IncomingHttpHeaders } from "node:http"
import { Effect } from "effect"
import { absoluteFormAuthority } from "../../Address.js"
import { MissingHost } from "../../Errors.js"

export type BindingError = MissingHost

const noHostname: Effect.Effect<string> = Effect.succeed("")

/** The hostname a `Host` value names: lowercased, without its port; undefined when empty. */
export const hostnameOf = (host: string | undefined): string | undefined => {
  if (host === undefined) return undefined
  const trimmed = host.trim().toLowerCase()
  const name = trimmed.startsWith("[") ? trimmed.slice(0, trimmed.indexOf("]") + 1) : trimmed.replace(/:\d*$/, "")
  return name === "" ? undefined : name
}

/**
 * The request's hostname: `""` outside hostname-aware mode. An absolute-form target
 * (`GET http://b.example/...`) names it in place of `Host` (RFC 9112 3.2.2).
 */
export const bindingOf = (rawUrl: string, headers: IncomingHttpHeaders, hostnameAware: boolean): Effect.Effect<string, BindingError> => {
  if (!hostnameAware) return noHostname
  const hostname = hostnameOf(absoluteFormAuthority(rawUrl) ?? headers.host)
  return hostname === undefined ? new MissingHost() : Effect.succeed(hostname)
}
