// Step 1, id (routing.md "Addressing"): namespace, id, rest and query from the raw target.
import type { Effect } from "effect"
import { parseAddress, type Address, type AddressError } from "../../Address.js"

export const readAddress = (rawUrl: string): Effect.Effect<Address, AddressError> => parseAddress(rawUrl)
