// Generators for property tests, in the terms the tests used with fast-check (constantFrom,
// oneof, string, bigInt...), over Effect's own `Arbitrary` (Effect 4 no longer ships
// FastCheck). Run them with `it.prop` of @effect/vitest, or `assertProperty` inside a test.
import { Arbitrary, Effect, Schema } from "effect"

export type Arb<A> = Arbitrary.Arbitrary<A>

/** An index in [0, n): shrinks toward 0, so towards the first choice. */
const indexBelow = (n: number): Arb<number> => Arbitrary.schema(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: n - 1 })))

/** One of `values`; shrinks toward the first. */
export const constantFrom = <const A extends ReadonlyArray<unknown>>(...values: A): Arb<A[number]> =>
  Arbitrary.map(indexBelow(values.length), (i) => values[i])

/** A value of one of `arbitraries`; shrinks toward the first. */
export const oneof = <A>(...arbitraries: ReadonlyArray<Arb<A>>): Arb<A> => Arbitrary.flatMap(indexBelow(arbitraries.length), (i) => arbitraries[i]!)

export const constant = <const A>(value: A): Arb<A> => Arbitrary.Constant(value)

export const array = <A>(item: Arb<A>, options: { readonly minLength?: number; readonly maxLength?: number } = {}): Arb<Array<A>> =>
  Arbitrary.array(item, options)

const codeIn = (maximum: number): Arb<number> => Arbitrary.schema(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum })))

/** Any code point, half surrogates included, ASCII and the BMP as often as the rest. */
const codePoint: Arb<string> = Arbitrary.map(oneof(codeIn(0x7f), codeIn(0xffff), codeIn(0x10ffff)), (code) => String.fromCodePoint(code))

/**
 * A string of `minLength` to `maxLength` units: with `unit: "binary"` each unit is any code
 * point; by default printable ASCII (and a few edge cases: "", "\0", "__proto__"...).
 */
export const string = (options: { readonly minLength?: number; readonly maxLength?: number; readonly unit?: "binary" } = {}): Arb<string> => {
  if (options.unit === "binary") return Arbitrary.map(array(codePoint, options), (units) => units.join(""))
  const minLength = options.minLength ?? 0
  return Arbitrary.schema(
    options.maxLength === undefined
      ? Schema.String.check(Schema.isMinLength(minLength))
      : Schema.String.check(Schema.isBetweenLength(minLength, options.maxLength))
  )
}

/** A bigint in [min, max]. */
export const bigInt = (options: { readonly min: bigint; readonly max: bigint }): Arb<bigint> =>
  Arbitrary.schema(Schema.BigInt.check(Schema.isBetweenBigInt({ minimum: options.min, maximum: options.max })))

/**
 * fast-check's `assert(property(...arbitraries, check))`: checks `check` on generated values
 * (an assertion that throws falsifies it, as `false` does), shrinks the first failure and
 * rejects with it.
 */
export const assertProperty = async <const Arbs extends ReadonlyArray<Arb<any>>>(
  arbitraries: Arbs,
  check: (values: { -readonly [K in keyof Arbs]: Arbs[K] extends Arb<infer A> ? A : never }) => boolean | void,
  options?: Arbitrary.CheckOptions
): Promise<void> => {
  const all = Arbitrary.all(arbitraries) as unknown as Arb<{ -readonly [K in keyof Arbs]: Arbs[K] extends Arb<infer A> ? A : never }>
  const result = await Effect.runPromise(
    Arbitrary.checkEffect(all, (values) => Effect.try({ try: () => check(values) !== false, catch: (error) => error }), options)
  )
  const failure = Arbitrary.formatCheckFailure(result)
  if (failure === undefined) return
  throw new Error(failure, { cause: result._tag === "Falsified" && result.failure._tag === "PropertyError" ? result.failure.error : undefined })
}
