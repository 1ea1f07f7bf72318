// The generators and checks of the registry's property tests, on Effect's own property testing
// (effect/Arbitrary: values derived from a Schema, composed, checked and shrunk). Effect 4 ships
// no FastCheck, and its Arbitrary has no weighted choice, option or sub-array: they are built
// here, each with the distribution fast-check gave it (weights, the chance of the nil value,
// lengths up to `2 * minLength + 10` unless told otherwise), so that every property ranges over
// what it did before.
import { Arbitrary as A, Cause, Effect, Schema } from "effect"

export type Arbitrary<T> = A.Arbitrary<T>
export type CheckOptions = A.CheckOptions

export const map: {
  <T, B>(f: (value: T) => B): (self: Arbitrary<T>) => Arbitrary<B>
  <T, B>(self: Arbitrary<T>, f: (value: T) => B): Arbitrary<B>
} = A.map

export const constant = <const T>(value: T): Arbitrary<T> => A.Constant(value)

export const integer = (bounds: { readonly min: number; readonly max: number }): Arbitrary<number> =>
  A.schema(Schema.Int.check(Schema.isBetween({ minimum: bounds.min, maximum: bounds.max })))

export const nat = (bounds: { readonly max: number }): Arbitrary<number> => integer({ min: 0, max: bounds.max })

export const boolean = (): Arbitrary<boolean> => A.schema(Schema.Boolean)

/** One of `values`, shrinking towards the first. */
export const constantFrom = <const T>(...values: ReadonlyArray<T>): Arbitrary<T> => map(integer({ min: 0, max: values.length - 1 }), (i) => values[i]!)

/** A finite double in [min, max] (max excluded when told), never -0 (it would not round-trip as text). */
export const double = (bounds: { readonly min: number; readonly max: number; readonly maxExcluded?: boolean }): Arbitrary<number> =>
  map(A.schema(Schema.Finite.check(Schema.isBetween({ minimum: bounds.min, maximum: bounds.max, exclusiveMaximum: bounds.maxExcluded === true }))), (x) =>
    x === 0 ? 0 : x
  )

export const bigInt = (bounds: { readonly min: bigint; readonly max: bigint }): Arbitrary<bigint> =>
  A.schema(Schema.BigInt.check(Schema.isBetweenBigInt({ minimum: bounds.min, maximum: bounds.max })))

/** Printable ASCII, as fast-check's `string()`: at most 10 characters unless told. */
export const string = (bounds: { readonly maxLength?: number } = {}): Arbitrary<string> =>
  A.schema(Schema.String.check(Schema.isMaxLength(bounds.maxLength ?? 10), Schema.isPattern(/^[\x20-\x7e]*$/)))

export const stringMatching = (pattern: RegExp): Arbitrary<string> => A.schema(Schema.String.check(Schema.isPattern(pattern)))

export const record = <const R extends Record<string, Arbitrary<unknown>>>(fields: R): Arbitrary<{ -readonly [K in keyof R]: R[K] extends Arbitrary<infer T> ? T : never }> =>
  A.all(fields) as never

export const tuple = <const T extends ReadonlyArray<Arbitrary<unknown>>>(...items: T): Arbitrary<{ -readonly [K in keyof T]: T[K] extends Arbitrary<infer V> ? V : never }> =>
  A.all(items) as never

type ValueOf<X> = X extends Arbitrary<infer T> ? T : X extends { readonly arbitrary: Arbitrary<infer T> } ? T : never

/** One of `options` (each of weight 1 unless given), shrinking towards the first. */
export const oneof = <const O extends ReadonlyArray<Arbitrary<unknown> | { readonly arbitrary: Arbitrary<unknown>; readonly weight: number }>>(
  ...options: O
): Arbitrary<ValueOf<O[number]>> => {
  const weighted = options.map((option) => (A.isArbitrary(option) ? { arbitrary: option, weight: 1 } : option))
  const ends: Array<number> = []
  let total = 0
  for (const { weight } of weighted) ends.push((total += weight))
  return A.flatMap(integer({ min: 0, max: total - 1 }), (n) => weighted[ends.findIndex((end) => n < end)]!.arbitrary) as never
}

/** `nil` once for every `freq` (default 5) values of `arbitrary`. */
export const option = <T, const N>(arbitrary: Arbitrary<T>, options: { readonly nil: N; readonly freq?: number }): Arbitrary<T | N> =>
  oneof({ arbitrary: constant(options.nil), weight: 1 }, { arbitrary, weight: options.freq ?? 5 })

interface Lengths {
  readonly minLength?: number
  readonly maxLength?: number
  /** "max": lengths over the whole range, not only up to `2 * minLength + 10`. */
  readonly size?: "max"
}

/**
 * Arrays of `item`, their length drawn first over the same range as fast-check's (Effect's own
 * `array` grows with the check's size, and would keep a long `minLength` at exactly that).
 */
export const array = <T>(item: Arbitrary<T>, lengths: Lengths = {}): Arbitrary<Array<T>> => {
  const min = lengths.minLength ?? 0
  const max = lengths.size === "max" ? lengths.maxLength! : Math.min(lengths.maxLength ?? Infinity, 2 * min + 10)
  return A.flatMap(integer({ min, max }), (length) => A.array(item, { minLength: length, maxLength: length }))
}

/** Arrays whose items are distinct (by `selector`): a repeated one is dropped. */
export const uniqueArray = <T>(item: Arbitrary<T>, lengths: Lengths & { readonly selector?: (value: T) => unknown } = {}): Arbitrary<Array<T>> =>
  map(array(item, lengths), (items) => {
    const seen = new Set<unknown>()
    return items.filter((value) => {
      const key = lengths.selector === undefined ? value : lengths.selector(value)
      return seen.has(key) ? false : (seen.add(key), true)
    })
  })

/** Some of `values`, in their order: how many drawn first, then which. */
export const subarray = <T>(values: ReadonlyArray<T>, lengths: { readonly minLength?: number; readonly maxLength?: number } = {}): Arbitrary<Array<T>> =>
  A.flatMap(integer({ min: lengths.minLength ?? 0, max: Math.min(lengths.maxLength ?? values.length, values.length) }), (count) =>
    map(A.all(Array.from({ length: count }, (_, i) => integer({ min: 0, max: values.length - 1 - i }))), (picks) => {
      const left = values.map((_, i) => i)
      return picks.map((pick) => left.splice(pick, 1)[0]!).sort((a, b) => a - b).map((i) => values[i]!)
    })
  )

/** Checks an effectful property; a failure (a thrown assertion too) is shrunk, and reported as a defect. */
export const checkEffect = <T, E, R>(arbitrary: Arbitrary<T>, property: (value: T) => Effect.Effect<unknown, E, R>, options?: CheckOptions): Effect.Effect<A.CheckResult<T, unknown>, never, R> =>
  Effect.flatMap(
    A.checkEffect(
      arbitrary,
      (value): Effect.Effect<boolean, unknown, R> =>
        property(value).pipe(
          Effect.map((holds) => holds !== false),
          Effect.catchCause((cause): Effect.Effect<never, unknown> => (Cause.hasInterrupts(cause) ? Effect.failCause(cause) : Effect.fail(cause)))
        ),
      options
    ),
    (result) => {
      const failure = A.formatCheckFailure(result)
      return failure === undefined ? Effect.succeed(result) : Effect.die(new Error(failure))
    }
  )

/** Asserts a property that may return a promise, as fast-check's `assert` did; rejects with the shrunk failure. */
export const assertProperty = <T>(arbitrary: Arbitrary<T>, property: (value: T) => unknown, options?: CheckOptions): Promise<void> =>
  Effect.runPromise(
    Effect.asVoid(checkEffect(arbitrary, (value) => Effect.tryPromise({ try: async () => await property(value), catch: (error) => error }), options))
  )
