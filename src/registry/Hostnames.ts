// Hostname-aware mode's rules as pure decisions (docs/proxy.md "Hostname-aware mode",
// docs/protocol.md "Resolution" steps 1 to 3 and 5): the (hostname, namespace) -> env bindings a registration sets
// or is refused, what a resolve does with a placement held through another hostname, the
// displacement wait, and the candidates of a request's hostname. The bucket model and the
// Lua scripts both follow these; nothing here reads a clock or a store.
import type { Takeover } from "../Config.js"
import type { NamespaceRegistration } from "./Domain.js"

export interface Binding {
  readonly env: string
  /** The registration epoch that set it (decimal string, compared as an integer). */
  readonly epoch: string
  /** New ids of the pair wait until then after a rebinding to another env; 0 when they need not. */
  readonly displacedUntil: number
}

/** Key of a binding: the hostname and the namespace. */
export const bindingKey = (hostname: string, namespace: string): string => `${hostname}\n${namespace}`

/** Epochs are decimal strings, compared as integers (docs/protocol.md). */
const isHigher = (epoch: string, than: string): boolean => BigInt(epoch) > BigInt(than)

export type BindingDecision =
  | { readonly _tag: "Conflict"; readonly hostname: string; readonly namespace: string }
  | { readonly _tag: "Bind"; readonly updates: ReadonlyMap<string, Binding> }

/**
 * What a registration at `epoch` does to the bindings (docs/proxy.md "Hostname-aware mode"): the first
 * registration of a pair binds it; one naming the bound env is accepted whatever its epoch
 * (a higher epoch is kept); one naming another env rebinds the pair only with a higher epoch,
 * and new ids of the pair then wait one lease. Otherwise the whole registration is refused
 * (409) and nothing changes. Entries without a hostname (outside hostname-aware mode) bind nothing.
 */
export const decideBindings = (
  bindings: ReadonlyMap<string, Binding>,
  entries: ReadonlyArray<NamespaceRegistration>,
  epoch: string,
  now: number,
  leaseMs: number
): BindingDecision => {
  const updates = new Map<string, Binding>()
  for (const entry of entries) {
    if (entry.hostname === "") continue
    const key = bindingKey(entry.hostname, entry.namespace)
    const bound = updates.get(key) ?? bindings.get(key)
    if (bound === undefined) {
      updates.set(key, { env: entry.env, epoch, displacedUntil: 0 })
    } else if (bound.env === entry.env) {
      if (isHigher(epoch, bound.epoch)) updates.set(key, { ...bound, epoch })
    } else if (isHigher(epoch, bound.epoch)) {
      updates.set(key, { env: entry.env, epoch, displacedUntil: now + leaseMs })
    } else {
      return { _tag: "Conflict", hostname: entry.hostname, namespace: entry.namespace }
    }
  }
  return { _tag: "Bind", updates }
}

/** What the resolve of an id does with its live placement, by the hostnames involved (docs/protocol.md "Resolution" step 2). */
export type HeldDecision =
  | { readonly _tag: "Forward" }
  | { readonly _tag: "Deny" }
  /** Wind-down: the placement's deadline (set now if it had none); answer 503 until then. */
  | { readonly _tag: "WindingDown"; readonly deadline: number }

/**
 * A live placement reached through a hostname its owner is registered for is forwarded (during a
 * wind-down too, until the deadline: docs/proxy.md "Hostname-aware mode"); through another hostname of
 * the env, the env's takeover decides. (A worker registered for several hostnames of the
 * namespace keeps its placements whichever of them a request comes through.)
 */
export const decideHeld = (
  row: { readonly windDownAt: number },
  ownerServesHostname: boolean,
  takeover: Takeover,
  now: number,
  leaseMs: number
): HeldDecision => {
  if (ownerServesHostname) return { _tag: "Forward" }
  if (takeover === "deny") return { _tag: "Deny" }
  return { _tag: "WindingDown", deadline: row.windDownAt !== 0 ? row.windDownAt : now + leaseMs }
}

/** How long new ids of the pair still wait after a rebinding (docs/protocol.md "Resolution" step 3); 0: not at all. */
export const displacementLeftMs = (binding: Binding, now: number): number => Math.max(0, binding.displacedUntil - now)

/** Whether a worker's registration makes it a candidate for a request through `hostname` (docs/proxy.md "Hostname-aware mode"). */
export const servesHostname = (
  registrations: ReadonlyArray<NamespaceRegistration>,
  env: string,
  namespace: string,
  hostname: string
): boolean => registrations.some((r) => r.env === env && r.namespace === namespace && r.hostname === hostname)
