// Step 5, hostname binding (routing.md "Hostname-aware mode", DESIGN 8): which hostname
// and env the request belongs to. Outside hostname-aware mode (the only mode main.ts
// accepts until that issue) every request has the empty hostname and env.
import type { IncomingHttpHeaders } from "node:http"
import { Effect } from "effect"
import type { MissingHost, UnknownNamespace } from "../../Errors.js"

export interface Binding {
  readonly hostname: string
  readonly env: string
}

export type BindingError = MissingHost | UnknownNamespace

const unbound: Effect.Effect<Binding> = Effect.succeed({ hostname: "", env: "" })

export const bindingOf = (_namespace: string, _headers: IncomingHttpHeaders): Effect.Effect<Binding, BindingError> => unbound
