// Step 1, id (docs/proxy.md "Addressing"): namespace, id, rest and query from the raw target.
// A Result, which `afterStep` continues at once (a Result is no longer an Effect in Effect 4).
import type { Result } from "effect"
import { parseAddress, type Address, type AddressError } from "../../Address.js"

export const readAddress = (rawUrl: string): Result.Result<Address, AddressError> => parseAddress(rawUrl)
