// The generators and checks of the serving, proxy-protocol and inspect property tests, on
// Effect's own property testing (effect/Arbitrary: values derived from a Schema, composed,
// checked and shrunk). Effect 4 ships no FastCheck: what these tests took from it is built here
// under its names, over the same ranges (ipV6 in full, compressed and IPv4-suffixed forms).
import { Arbitrary as A, Cause, Effect, Schema } from "effect"

export type Arbitrary<T> = A.Arbitrary<T>

export const map: {
  <T, B>(f: (value: T) => B): (self: Arbitrary<T>) => Arbitrary<B>
  <T, B>(self: Arbitrary<T>, f: (value: T) => B): Arbitrary<B>
} = A.map

export const constant = <const T>(value: T): Arbitrary<T> => A.Constant(value)

export const integer = (bounds: { readonly min: number; readonly max: number }): Arbitrary<number> =>
  A.schema(Schema.Int.check(Schema.isBetween({ minimum: bounds.min, maximum: bounds.max })))

export const boolean = (): Arbitrary<boolean> => A.schema(Schema.Boolean)

/** A finite double in [min, max] (max excluded when told). */
export const double = (bounds: { readonly min: number; readonly max: number; readonly maxExcluded?: boolean }): Arbitrary<number> =>
  A.schema(Schema.Finite.check(Schema.isBetween({ minimum: bounds.min, maximum: bounds.max, exclusiveMaximum: bounds.maxExcluded === true })))

/** Printable ASCII, at most 10 characters. */
export const string = (): Arbitrary<string> => A.schema(Schema.String.check(Schema.isMaxLength(10), Schema.isPattern(/^[\x20-\x7e]*$/)))

export const stringMatching = (pattern: RegExp): Arbitrary<string> => A.schema(Schema.String.check(Schema.isPattern(pattern)))

/** One of `values`, shrinking towards the first. */
export const constantFrom = <const T extends ReadonlyArray<unknown>>(...values: T): Arbitrary<T[number]> =>
  map(integer({ min: 0, max: values.length - 1 }), (i) => values[i])

/** One of `options`, each as likely, shrinking towards the first. */
export const oneof = <const O extends ReadonlyArray<Arbitrary<unknown>>>(...options: O): Arbitrary<O[number] extends Arbitrary<infer T> ? T : never> =>
  A.flatMap(integer({ min: 0, max: options.length - 1 }), (i) => options[i]!) as never

/** `nil` once for every `freq` (default 5) values of `arbitrary`. */
export const option = <T, const N>(arbitrary: Arbitrary<T>, options: { readonly nil: N; readonly freq?: number }): Arbitrary<T | N> =>
  A.flatMap(integer({ min: 0, max: options.freq ?? 5 }), (n): Arbitrary<T | N> => (n === 0 ? constant(options.nil) : arbitrary))

export const record = <const R extends Record<string, Arbitrary<unknown>>>(fields: R): Arbitrary<{ -readonly [K in keyof R]: R[K] extends Arbitrary<infer T> ? T : never }> =>
  A.all(fields) as never

export const tuple = <const T extends ReadonlyArray<Arbitrary<unknown>>>(...items: T): Arbitrary<{ -readonly [K in keyof T]: T[K] extends Arbitrary<infer V> ? V : never }> =>
  A.all(items) as never

interface Lengths {
  readonly minLength?: number
  readonly maxLength?: number
}

/** Arrays of `item`, their length drawn first: up to `maxLength`, or `2 * minLength + 10` when none is given (as fast-check). */
export const array = <T>(item: Arbitrary<T>, lengths: Lengths = {}): Arbitrary<Array<T>> => {
  const min = lengths.minLength ?? 0
  const max = lengths.maxLength ?? 2 * min + 10
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

export const uint8Array = (lengths: Lengths = {}): Arbitrary<Uint8Array> =>
  map(array(integer({ min: 0, max: 255 }), lengths), (bytes) => Uint8Array.from(bytes))

/** A dotted-quad IPv4 address. */
export const ipV4 = (): Arbitrary<string> => map(A.all([0, 1, 2, 3].map(() => integer({ min: 0, max: 255 }))), (parts) => parts.join("."))

const hexGroup = map(integer({ min: 0, max: 0xffff }), (n) => n.toString(16))

/**
 * An IPv6 address as text: eight groups, or fewer around a `::`, the last two groups written
 * as an IPv4 address one time in two.
 */
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

const check = <T>(arbitrary: Arbitrary<T>, property: (value: T) => Effect.Effect<unknown, unknown>, options?: A.CheckOptions): Effect.Effect<void> =>
  Effect.flatMap(
    A.checkEffect(
      arbitrary,
      (value) =>
        property(value).pipe(
          Effect.map((holds) => holds !== false),
          Effect.catchCause((cause) => (Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause) : Effect.fail(cause)))
        ),
      options
    ),
    (result) => {
      const failure = A.formatCheckFailure(result)
      return failure === undefined ? Effect.void : Effect.die(new Error(failure))
    }
  )

/** Asserts a synchronous property, as fast-check's `assert` did: throws the shrunk failure. */
export const assertProperty = <T>(arbitrary: Arbitrary<T>, property: (value: T) => unknown, options?: A.CheckOptions): void =>
  Effect.runSync(check(arbitrary, (value) => Effect.try({ try: () => property(value), catch: (error) => error }), options))

/** Asserts a property that returns a promise; rejects with the shrunk failure. */
export const assertAsyncProperty = <T>(arbitrary: Arbitrary<T>, property: (value: T) => Promise<unknown>, options?: A.CheckOptions): Promise<void> =>
  Effect.runPromise(check(arbitrary, (value) => Effect.tryPromise({ try: () => property(value), catch: (error) => error }), options))
