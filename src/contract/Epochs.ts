// Placement epochs (docs/worker.md "Durable state: fencing by epoch"): decimal strings of any size without leading zeros,
// e.g. "0", "17", "18446744073709551617". They pass 2^53, so they are never parsed into
// numbers: the longer string is the larger epoch, and equal lengths compare lexically.

const EPOCH_PATTERN = /^(0|[1-9][0-9]*)$/

/** True for a well-formed epoch: `0` or a decimal string without leading zeros. */
export const isEpoch = (s: string): boolean => typeof s === "string" && EPOCH_PATTERN.test(s)

/** Throws a TypeError naming `value` unless it is a well-formed epoch. */
export function assertEpoch(value: string): asserts value is string {
  if (!isEpoch(value)) {
    const shown = typeof value === "string" ? JSON.stringify(value) : String(value)
    throw new TypeError(`invalid epoch ${shown}: expected a decimal string without leading zeros`)
  }
}

/** -1, 0 or 1 as epoch `a` is older than, the same as, or newer than epoch `b`. */
export const compareEpochs = (a: string, b: string): -1 | 0 | 1 => {
  assertEpoch(a)
  assertEpoch(b)
  if (a.length !== b.length) return a.length < b.length ? -1 : 1
  return a === b ? 0 : a < b ? -1 : 1
}
