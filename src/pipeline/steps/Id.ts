// Step 1, id (docs/proxy.md "Addressing"): namespace, id, rest and query from the raw target.
import type { Effect } from "effect"
import { parseAddress, type Address, type AddressError } from "../../Address.js"

export const readAddress = (rawUrl: string): Effect.Effect<Address, AddressError> => parseAddress(rawUrl)
