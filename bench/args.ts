// The command-line options of the benchmarks: `--name=value` numbers and `--flag` switches.

const argv = process.argv.slice(2)

/** `--name=<positive number>`, or `fallback` when absent; anything else stops the run. */
export const numberArg = (name: string, fallback: number): number => {
  const raw = argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
  const value = raw === undefined ? fallback : Number(raw)
  if (!(value > 0)) throw new Error(`--${name}= expects a positive number`)
  return value
}

/** `--name=<text>`, or undefined when absent. */
export const textArg = (name: string): string | undefined => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)

export const flagArg = (name: string): boolean => argv.includes(`--${name}`)
