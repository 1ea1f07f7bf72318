// Step 1, id (docs/proxy.md "Addressing"): namespace, id, rest and query from the raw target.
import { Effect } from "effect"
import { parseAddress, type Address, type AddressError } from "../../Address.js"

/** Decided at once: an Exit, which `Effect.gen` continues without a turn of the fiber. */
export const readAddress = (rawUrl: string): Effect.Effect<Address, AddressError> => Effect.fromResult(parseAddress(rawUrl))
