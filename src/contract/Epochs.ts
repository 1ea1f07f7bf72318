// Placement epochs (docs/registry-api.md "Conventions", docs/worker.md "Durable state: fencing by
// epoch"): decimal strings without leading zeros, e.g. "0", "17", "1764452669741000001". The
// registry mints them from a counter seeded at `<ms>000000` (19 digits today); a registration
// epoch is the worker's own. They pass 2^53, so they are never parsed into numbers: the longer
// string is the larger epoch, and equal lengths compare lexically. This is the one check of
// their form, for Pinboard (registry bodies, caller tokens) and workers alike.

/** The longest epoch accepted: far beyond any counter, and short enough to reject bad input cheaply. */
export const MAX_EPOCH_DIGITS = 40

const EPOCH_PATTERN = new RegExp(`^(0|[1-9][0-9]{0,${MAX_EPOCH_DIGITS - 1}})$`)

/** True for a well-formed epoch: `0` or a decimal string without leading zeros, at most 40 digits. */
export const isEpoch = (s: string): boolean => typeof s === "string" && EPOCH_PATTERN.test(s)

/** Throws a TypeError naming `value` unless it is a well-formed epoch. */
export function assertEpoch(value: string): asserts value is string {
  if (!isEpoch(value)) {
    const shown = typeof value === "string" ? JSON.stringify(value) : String(value)
    throw new TypeError(`invalid epoch ${shown}: expected a decimal string without leading zeros, at most ${MAX_EPOCH_DIGITS} digits`)
  }
}

/** -1, 0 or 1 as epoch `a` is older than, the same as, or newer than epoch `b`. */
export const compareEpochs = (a: string, b: string): -1 | 0 | 1 => {
  assertEpoch(a)
  assertEpoch(b)
  if (a.length !== b.length) return a.length < b.length ? -1 : 1
  return a === b ? 0 : a < b ? -1 : 1
}
