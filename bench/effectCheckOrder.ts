// A check order of nine steps that decide at once (as most requests see them: no credential
// to check, no caller token, the cap not reached), then the forward, written each of the ways
// the pipeline could write it. bench/effectCosts.ts measures them; docs/proxy.md "What Effect
// constructs cost" has the figures.
import { Effect, Exit } from "effect"
import { IdEmpty, InvalidCredential, NamespaceNotAllowed } from "../src/Errors.js"

type Checked = Effect.Effect<number, IdEmpty | InvalidCredential | NamespaceNotAllowed>

// The steps fail on a negative input, which no measured request has: the branch keeps V8 from
// folding them away, and their types carry the catalogue rows a real step's do.
const succeeds = (n: number): Effect.Effect<number, IdEmpty> => (n < 0 ? Effect.fail(new IdEmpty()) : Effect.succeed(n + 1))
const passes = (n: number): Effect.Effect<void, InvalidCredential> => (n < 0 ? Effect.fail(new InvalidCredential()) : Effect.void)
const exits = (n: number): Exit.Exit<number, NamespaceNotAllowed> => (n < 0 ? Exit.fail(new NamespaceNotAllowed()) : Exit.succeed(n + 1))
/** Not decided: each a turn of the fiber's run loop, as `Effect.sync` and service calls are. */
const synced = (n: number): Effect.Effect<number> => Effect.sync(() => n + 1)
const plain = (n: number): number => (n < 0 ? -1 : n + 1)

/** The nine steps as plain function calls returning values; a negative value would be a refusal. */
export const plainCalls = (request: Effect.Effect<number>): Checked =>
  Effect.suspend(() => {
    const a = plain(0)
    const b = plain(a)
    const c = plain(b)
    const d = plain(c)
    const e = plain(d)
    const f = plain(e)
    const g = plain(f)
    const h = plain(g)
    const i = plain(h)
    if (i < 0) return Effect.fail(new IdEmpty())
    return Effect.map(request, (r) => r + i)
  })

type Chain = <A, E, B, E2>(step: Effect.Effect<A, E>, then: (a: A) => Effect.Effect<B, E2>) => Effect.Effect<B, E | E2>

/** The nine steps chained by `chain`. */
const chained = (chain: Chain) => (request: Effect.Effect<number>): Checked =>
  chain(succeeds(0), (a) =>
    chain(passes(a), () =>
      chain(exits(a), (b) =>
        chain(succeeds(b), (c) =>
          chain(passes(c), () =>
            chain(exits(c), (d) =>
              chain(succeeds(d), (e) =>
                chain(passes(e), () => chain(exits(e), (f) => Effect.map(request, (r) => r + f)))
              )
            )
          )
        )
      )
    )
  )

export const byFlatMap = chained((step, then) => Effect.flatMap(step, then))
/** `Effect.flatMapEager` continues an Exit at once, as the hand-chained pipeline before Pipeline.ts's generators did. */
export const byFlatMapEager = chained((step, then) => Effect.flatMapEager(step, then))

/** The generator body every `yield*` form shares: nine decided steps, then the forward. */
const nineDecided = function* (request: Effect.Effect<number>) {
  const a = yield* succeeds(0)
  yield* passes(a)
  const b = yield* exits(a)
  const c = yield* succeeds(b)
  yield* passes(c)
  const d = yield* exits(c)
  const e = yield* succeeds(d)
  yield* passes(e)
  const f = yield* exits(e)
  return f + (yield* request)
}

export const inFnUntraced: (request: Effect.Effect<number>) => Checked = Effect.fnUntraced(nineDecided)
export const inFnUntracedEager: (request: Effect.Effect<number>) => Checked = Effect.fnUntracedEager(nineDecided)
export const inFn: (request: Effect.Effect<number>) => Checked = Effect.fn("bench.checkOrder")(nineDecided)

/** `Effect.gen` with the body written where it runs: a new generator function per request. */
export const inGen = (request: Effect.Effect<number>): Checked =>
  Effect.gen(function* () {
    const a = yield* succeeds(0)
    yield* passes(a)
    const b = yield* exits(a)
    const c = yield* succeeds(b)
    yield* passes(c)
    const d = yield* exits(c)
    const e = yield* succeeds(d)
    yield* passes(e)
    const f = yield* exits(e)
    return f + (yield* request)
  })

/** Nine steps that do not decide at once (`Effect.sync`), in one `Effect.fnUntraced`. */
export const syncedInFnUntraced: (request: Effect.Effect<number>) => Effect.Effect<number> = Effect.fnUntraced(function* (request: Effect.Effect<number>) {
  let n = 0
  for (let i = 0; i < 9; i++) n = yield* synced(n)
  return n + (yield* request)
})
