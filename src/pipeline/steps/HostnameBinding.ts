// Step 5, hostname binding (routing.md "Hostname-aware mode", DESIGN 8): which hostname the
// request belongs to. In hostname-aware mode the `Host` header names it, lowercased and with
// the port stripped; none is `400 missing Host header`. The env is the (hostname, namespace)
// binding's, which the registry finds at resolve (an unbound pair: `404 unknown namespace`).
// Outside hostname-aware mode every request has the empty hostname and env.
import type { IncomingHttpHeaders } from "node:http"
import { Effect } from "effect"
import { MissingHost } from "../../Errors.js"

export interface Binding {
  readonly hostname: string
  readonly env: string
}

export type BindingError = MissingHost

const unbound: Effect.Effect<Binding> = Effect.succeed({ hostname: "", env: "" })

/** The hostname a `Host` value names: lowercased, without its port; undefined when empty. */
export const hostnameOf = (host: string | undefined): string | undefined => {
  if (host === undefined) return undefined
  const trimmed = host.trim().toLowerCase()
  const name = trimmed.startsWith("[") ? trimmed.slice(0, trimmed.indexOf("]") + 1) : trimmed.replace(/:\d*$/, "")
  return name === "" ? undefined : name
}

export const bindingOf = (headers: IncomingHttpHeaders, hostnameAware: boolean): Effect.Effect<Binding, BindingError> => {
  if (!hostnameAware) return unbound
  const hostname = hostnameOf(headers.host)
  return hostname === undefined ? new MissingHost() : Effect.succeed({ hostname, env: "" })
}
