// The generators and checks of the property tests, under fast-check's names and with the ranges
// fast-check 3 gave them (the tests were written for it), over Effect's own property testing
// (effect/Arbitrary: values derived from a Schema, composed, checked and shrunk). Effect 4 ships
// no FastCheck, and its Arbitrary has no weighted choice, option, sub-array or fast-check's array
// lengths: they are built here. Run them with `it.prop` of @effect/vitest, or `assertProperty`
// (`assertEffect` in an Effect) inside a test.
import { Arbitrary as A, Cause, Effect, Schema } from "effect"

/** fc.Arbitrary: generates values of type T and shrinks a failing one. */
export type Arbitrary<T> = A.Arbitrary<T>

/** fc's `arbitrary.map`, data-first or piped. */
export const map: {
  <T, B>(f: (value: T) => B): (self: Arbitrary<T>) => Arbitrary<B>
  <T, B>(self: Arbitrary<T>, f: (value: T) => B): Arbitrary<B>
} = A.map

/** fc.constant. */
export const constant = <const T>(value: T): Arbitrary<T> => A.Constant(value)

/** fc.integer: an integer in [min, max], the ends more often, shrinking toward 0. */
export const integer = (bounds: { readonly min: number; readonly max: number }): Arbitrary<number> =>
  A.schema(Schema.Int.check(Schema.isBetween({ minimum: bounds.min, maximum: bounds.max })))

/** fc.nat: an integer in [0, max]. */
export const nat = (bounds: { readonly max: number }): Arbitrary<number> => integer({ min: 0, max: bounds.max })

/** fc.boolean. */
export const boolean = (): Arbitrary<boolean> => A.schema(Schema.Boolean)

/** fc.bigInt: a bigint in [min, max]. */
export const bigInt = (bounds: { readonly min: bigint; readonly max: bigint }): Arbitrary<bigint> =>
  A.schema(Schema.BigInt.check(Schema.isBetweenBigInt({ minimum: bounds.min, maximum: bounds.max })))

/** fc.double with noNaN: a finite double in [min, max] (max excluded when told), never -0 (fast-check's min 0 excludes it). */
export const double = (bounds: { readonly min: number; readonly max: number; readonly maxExcluded?: boolean }): Arbitrary<number> =>
  map(A.schema(Schema.Finite.check(Schema.isBetween({ minimum: bounds.min, maximum: bounds.max, exclusiveMaximum: bounds.maxExcluded === true }))), (x) =>
    x === 0 ? 0 : x
  )

/**
 * An index in [0, n), each as likely, as fast-check picks (a Schema integer would lean to the
 * ends: a literal's pick does not), shrinking toward 0 by halves.
 */
const index = (n: number): Arbitrary<number> =>
  A.schema(Schema.Literals(Array.from({ length: n }, (_, i) => i)), {
    shrink: (i) => {
      const smaller: Array<number> = []
      for (let gap = i; gap > 0; gap = Math.floor(gap / 2)) smaller.push(i - gap)
      return smaller
    }
  })

/** fc.constantFrom: one of `values`, each as likely, shrinking toward the first. */
export const constantFrom = <const T>(...values: ReadonlyArray<T>): Arbitrary<T> => map(index(values.length), (i) => values[i]!)

type ValueOf<X> = X extends Arbitrary<infer T> ? T : X extends { readonly arbitrary: Arbitrary<infer T> } ? T : never

/** fc.oneof: a value of one of `options`, each as likely as its weight (1 unless given), shrinking toward the first. */
export const oneof = <const O extends ReadonlyArray<Arbitrary<unknown> | { readonly arbitrary: Arbitrary<unknown>; readonly weight: number }>>(
  ...options: O
): Arbitrary<ValueOf<O[number]>> => {
  const slots = options.flatMap((option) => (A.isArbitrary(option) ? [option] : Array<Arbitrary<unknown>>(option.weight).fill(option.arbitrary)))
  return A.flatMap(index(slots.length), (i) => slots[i]!) as never
}

/** fc.option: `nil` once for every `freq` (default 5) values of `arbitrary`. */
export const option = <T, const N>(arbitrary: Arbitrary<T>, options: { readonly nil: N; readonly freq?: number }): Arbitrary<T | N> =>
  oneof({ arbitrary: constant(options.nil), weight: 1 }, { arbitrary, weight: options.freq ?? 5 })

/** fc.record: an object of a value of each field's arbitrary. */
export const record = <const R extends Record<string, Arbitrary<unknown>>>(fields: R): Arbitrary<{ -readonly [K in keyof R]: R[K] extends Arbitrary<infer T> ? T : never }> =>
  A.all(fields) as never

/** fc.tuple: a value of each of `items`, in their order. */
export const tuple = <const T extends ReadonlyArray<Arbitrary<unknown>>>(...items: T): Arbitrary<{ -readonly [K in keyof T]: T[K] extends Arbitrary<infer V> ? V : never }> =>
  A.all(items) as never

interface Lengths {
  readonly minLength?: number | undefined
  readonly maxLength?: number | undefined
  /** "max": lengths over the whole range to `maxLength`, not only up to `2 * minLength + 10` (fast-check's `size: "max"`). */
  readonly size?: "max"
}

/**
 * fc.array: its length drawn first over fast-check's range, `minLength` to `maxLength` but at most
 * `2 * minLength + 10` unless `size: "max"` (Effect's own `array` grows with the check's size, and
 * would keep a long `minLength` at exactly that).
 */
export const array = <T>(item: Arbitrary<T>, lengths: Lengths = {}): Arbitrary<Array<T>> => {
  const min = lengths.minLength ?? 0
  const max = Math.min(lengths.maxLength ?? Infinity, lengths.size === "max" ? Infinity : 2 * min + 10)
  return A.flatMap(integer({ min, max }), (length) => A.array(item, { minLength: length, maxLength: length }))
}

/** fc.uniqueArray: an array whose items are distinct (by `selector`), a repeated one dropped. */
export const uniqueArray = <T>(item: Arbitrary<T>, lengths: Lengths & { readonly selector?: (value: T) => unknown } = {}): Arbitrary<Array<T>> =>
  map(array(item, lengths), (items) => {
    const seen = new Set<unknown>()
    return items.filter((value) => {
      const key = lengths.selector === undefined ? value : lengths.selector(value)
      return seen.has(key) ? false : (seen.add(key), true)
    })
  })

/** fc.subarray: some of `values`, in their order; how many drawn first, then which. */
export const subarray = <T>(values: ReadonlyArray<T>, lengths: { readonly minLength?: number; readonly maxLength?: number } = {}): Arbitrary<Array<T>> =>
  A.flatMap(integer({ min: lengths.minLength ?? 0, max: Math.min(lengths.maxLength ?? values.length, values.length) }), (count) =>
    map(A.all(Array.from({ length: count }, (_, i) => integer({ min: 0, max: values.length - 1 - i }))), (picks) => {
      const left = values.map((_, i) => i)
      return picks.map((pick) => left.splice(pick, 1)[0]!).sort((a, b) => a - b).map((i) => values[i]!)
    })
  )

/** fc.uint8Array: bytes, as many as `array` would draw. */
export const uint8Array = (lengths: Lengths = {}): Arbitrary<Uint8Array> => map(array(integer({ min: 0, max: 255 }), lengths), (bytes) => Uint8Array.from(bytes))

/** Any code point, half surrogates included: ASCII, the BMP and the rest each a third of the time. */
const codePoint = map(oneof(integer({ min: 0, max: 0x7f }), integer({ min: 0, max: 0xffff }), integer({ min: 0, max: 0x10ffff })), (code) =>
  String.fromCodePoint(code)
)

/**
 * fc.string: `minLength` to `maxLength` characters (at most `2 * minLength + 10`, as fast-check),
 * printable ASCII; with `unit: "binary"` any code point each; with `edgeCases`, printable ASCII
 * and now and then one of Effect's own edge cases ("\0", "\n", a half surrogate, "😀", "__proto__"...).
 */
export const string = (options: { readonly minLength?: number; readonly maxLength?: number; readonly unit?: "binary"; readonly edgeCases?: true } = {}): Arbitrary<string> => {
  if (options.unit === "binary") return map(array(codePoint, options), (units) => units.join(""))
  const minLength = options.minLength ?? 0
  const lengths = Schema.isBetweenLength(minLength, Math.min(options.maxLength ?? Infinity, 2 * minLength + 10))
  return A.schema(options.edgeCases === true ? Schema.String.check(lengths) : Schema.String.check(lengths, Schema.isPattern(/^[\x20-\x7e]*$/)))
}

/** fc.stringMatching: a string matching `pattern`. */
export const stringMatching = (pattern: RegExp): Arbitrary<string> => A.schema(Schema.String.check(Schema.isPattern(pattern)))

/** fc.ipV4: a dotted-quad IPv4 address. */
export const ipV4 = (): Arbitrary<string> => map(A.all([0, 1, 2, 3].map(() => integer({ min: 0, max: 255 }))), (parts) => parts.join("."))

const hexGroup = map(integer({ min: 0, max: 0xffff }), (n) => n.toString(16))

/** fc.ipV6: eight groups, or fewer around a `::`, the last two written as an IPv4 address one time in two. */
export const ipV6 = (): Arbitrary<string> =>
  A.flatMap(A.all([boolean(), integer({ min: -1, max: 8 })]), ([v4Tail, split]) => {
    const groups = v4Tail ? 6 : 8
    const tail = v4Tail ? ipV4() : constant(undefined)
    // split -1: all the groups written out; otherwise `::` after the first `split` groups, standing for at least one.
    const written = split < 0 ? groups : groups - 1
    const head = Math.min(split < 0 ? groups : split, written)
    return A.flatMap(integer({ min: 0, max: written - head }), (after) =>
      map(A.all([A.array(hexGroup, { minLength: head, maxLength: head }), A.array(hexGroup, { minLength: after, maxLength: after }), tail]), ([before, behind, v4]) => {
        const last = v4 === undefined ? behind : [...behind, v4]
        return split < 0 ? [...before, ...last].join(":") : `${before.join(":")}::${last.join(":")}`
      })
    )
  })

/**
 * fc.assert(fc.asyncProperty(...)) for an Effect property: a failure (false, a failed Effect, a
 * defect such as a failed assertion) is shrunk, and the check dies with the report.
 */
export const assertEffect = <T, E, R>(arbitrary: Arbitrary<T>, property: (value: T) => Effect.Effect<unknown, E, R>, options?: A.CheckOptions): Effect.Effect<void, never, R> =>
  Effect.flatMap(
    A.checkEffect(
      arbitrary,
      (value) =>
        property(value).pipe(
          Effect.map((holds) => holds !== false),
          // Interruption alone stays interruption; anything else falsifies the property.
          Effect.catchCause((cause) => (Cause.hasInterruptsOnly(cause) ? Effect.interrupt : Effect.fail(cause)))
        ),
      options
    ),
    (result) => {
      const report = A.formatCheckFailure(result)
      if (report === undefined) return Effect.void
      const failure = result._tag === "Falsified" && result.failure._tag === "PropertyError" ? Cause.squash(result.failure.error) : undefined
      return Effect.die(new Error(report, { cause: failure }))
    }
  )

/** fc.assert(fc.property(...)) or fc.assert(fc.asyncProperty(...)): `property` may return a promise; rejects with the shrunk failure. */
export const assertProperty = <T>(arbitrary: Arbitrary<T>, property: (value: T) => unknown, options?: A.CheckOptions): Promise<void> =>
  Effect.runPromise(assertEffect(arbitrary, (value) => Effect.tryPromise({ try: async () => await property(value), catch: (error) => error }), options))
