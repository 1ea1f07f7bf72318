// Printing bench:scale's figures: numbers, ratios, percentiles and right-aligned tables.

export const fixed = (n: number, digits = 0): string =>
  Number.isFinite(n) ? n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits }) : "-"

/** `value` as a multiple of `base`: "3.2x", or "-" without a base. */
export const ratio = (value: number, base: number): string => (base > 0 && Number.isFinite(value) ? `${fixed(value / base, 1)}x` : "-")

/** The q-quantile (0..1) of `values` (sorted here, in place): the value at rank ceil(q * n). */
export const quantile = (values: Array<number>, q: number): number => {
  if (values.length === 0) return Number.NaN
  values.sort((a, b) => a - b)
  return values[Math.min(values.length - 1, Math.max(0, Math.ceil(q * values.length) - 1))]!
}

export const maxOf = (values: ReadonlyArray<number>): number =>
  values.length === 0 ? Number.NaN : values.reduce((a, b) => (b > a ? b : a), -Infinity)

/** "yes" when `value <= target`, else "NO". */
export const meets = (value: number, target: number): string => (Number.isFinite(value) && value <= target ? "yes" : "NO")

export const printTable = (table: ReadonlyArray<ReadonlyArray<string>>): void => {
  const widths = table[0]!.map((_, c) => Math.max(...table.map((row) => (row[c] ?? "").length)))
  for (const row of table) console.log(row.map((cell, c) => cell.padStart(widths[c]!)).join("  "))
}

export const seconds = (ms: number): string => `${fixed(ms / 1000, 1)} s`
