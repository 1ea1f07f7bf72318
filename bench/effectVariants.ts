// What bench/effectCosts.ts measures: one "request" (a fiber that suspends twice, as a forward
// does: the resolve, then the worker's headers) with and without each construct around it.
import { Clock, Context, Duration, Effect, Schedule } from "effect"
import {
  AuthenticationRequired,
  IdBadCharacters,
  IdEmpty,
  IdTooLong,
  InsufficientScope,
  InvalidAttestation,
  InvalidCredential,
  NamespaceNotAllowed,
  NoLiveBackends,
  UnknownNamespace
} from "../src/Errors.js"
import type { RegistryClockService } from "../src/registry/RegistryClock.js"
import type { DeadlinesService } from "../src/proxy/Deadlines.js"
import { ConnectFailed, Refused, StaleResolve } from "../src/proxy/Signals.js"
import { byFlatMap, byFlatMapEager, inFn, inFnUntraced, inFnUntracedEager, inGen, plainCalls, syncedInFnUntraced } from "./effectCheckOrder.js"

/** A suspension resumed from the event loop, as a socket or Redis reply would resume it. */
const io: Effect.Effect<number> = Effect.callback<number>((resume) => {
  setImmediate(() => resume(Effect.succeed(1)))
})

/** Two suspensions: the shape of one forward (resolve, then headers). */
const resolvedAndSent: Effect.Effect<number> = Effect.flatMap(io, () => io)

/** A named re-resolve policy (`Schedule.recurs(1)` while stale) over an error that is its own reason. */
const STALE_RETRY: Schedule.Schedule<number, { readonly _tag: string }> = Schedule.recurs(1).pipe(
  Schedule.while<{ readonly _tag: string }, number>(({ input }) => input._tag === "StaleResolve")
)

/** The same request typed as one that may fail stale (for the retries). */
const request: Effect.Effect<number, StaleResolve> = resolvedAndSent

/** The same request typed as one that may also fail the ways a forward does (for catchTags). */
const forward: Effect.Effect<number, StaleResolve | Refused | ConnectFailed> = request

/** A send found stale once: the first attempt resolves, then fails; the second is the whole request. */
const staleOnce = (): Effect.Effect<number, StaleResolve> => {
  let attempts = 0
  return Effect.suspend(() => (attempts++ === 0 ? Effect.flatMap(io, () => Effect.fail(new StaleResolve())) : request))
}

/** Ten catalogue rows, and the one exhaustive mapping of them a server ends with. */
type Refusal =
  | IdEmpty | IdTooLong | IdBadCharacters | UnknownNamespace | NoLiveBackends
  | InvalidCredential | AuthenticationRequired | NamespaceNotAllowed | InsufficientScope | InvalidAttestation
const answers = {
  IdEmpty: () => Effect.succeed(400),
  IdTooLong: () => Effect.succeed(400),
  IdBadCharacters: () => Effect.succeed(400),
  UnknownNamespace: () => Effect.succeed(404),
  NoLiveBackends: () => Effect.succeed(503),
  InvalidCredential: () => Effect.succeed(401),
  AuthenticationRequired: () => Effect.succeed(401),
  NamespaceNotAllowed: () => Effect.succeed(403),
  InsufficientScope: () => Effect.succeed(403),
  InvalidAttestation: () => Effect.succeed(403)
}
const admitted: Effect.Effect<number, Refusal> = resolvedAndSent
/** Refused after the two suspensions, with a row near the end of the mapping. */
const refused: Effect.Effect<number, Refusal> = Effect.flatMap(resolvedAndSent, () => Effect.fail(new InsufficientScope()))
/** The same, the error made once: what is left of a refusal without the error's construction. */
const insufficientScope = new InsufficientScope()
const refusedWithMade: Effect.Effect<number, Refusal> = Effect.flatMap(resolvedAndSent, () => Effect.fail(insufficientScope))

/** A fiber-local setting with a default, as References.* are: read from the fiber's context. */
const Setting = Context.Reference<number>("bench/Setting", { defaultValue: () => 0 })

/** A service in the request fibers' context, as Registry and AppConfig are in src/http/Server.ts's. */
export class BenchService extends Context.Service<BenchService, { readonly n: number }>()("bench/Service") {}
export const benchService = { n: 1 }

/** The "+ Effect.gen" body, as a function made by Effect.fn (named: a span and a stack frame), Effect.fn (unnamed: a stack frame) and Effect.fnUntraced. */
const twoSuspensions = function* () {
  const a = yield* io
  const b = yield* io
  return a + b + (yield* Effect.succeed(0))
}
const namedFn = Effect.fn("bench.request")(twoSuspensions)
const unnamedFn = Effect.fn(twoSuspensions)
const untracedFn = Effect.fnUntraced(twoSuspensions)
const requestOnly = Effect.fnUntraced(function* () {
  return yield* request
})
const readsReference = Effect.fnUntraced(function* () {
  const setting = yield* Setting
  return setting + (yield* request)
})
const readsService = Effect.fnUntraced(function* () {
  const service = yield* BenchService
  return service.n + (yield* request)
})

/** What the variants are given: made once, as the process makes them at start-up. */
export interface Made {
  readonly deadlines: DeadlinesService
  readonly registryClock: RegistryClockService
}

/**
 * The context a variant's fibers run with: the services only (Effect's default scheduler, the
 * native tracer), as src/http/Server.ts runs requests; or with `References.TracerEnabled` false.
 */
export type Runtime = "default" | "tracer disabled"

export interface Variant {
  readonly name: string
  readonly make: (made: Made) => () => Effect.Effect<unknown, unknown, BenchService>
  readonly runtime?: Runtime
  /** The name of the variant it is also compared with, when the baseline is not the fair one. */
  readonly against?: string
}

const BASELINE = "baseline: one fiber, two suspensions"
const PLAIN_CHECKS = "check order: 9 plain function calls returning values, then the request"
const GEN_REQUEST = "Effect.fnUntraced: yield* the request, nothing else"
const FAILED_CAUGHT = "refused after the request, Effect.catch (no tag dispatch)"
const ONE_RETRY = "one retry (stale once): the hand-written catchTag"
const SPAN = "+ Effect.withSpan, no tracer provided (Effect's native tracer)"
const NO_STACK = { captureStackTrace: false } as const
export const VARIANTS: ReadonlyArray<Variant> = [
  { name: BASELINE, make: () => () => request },
  // Generators and functions
  { name: "+ Effect.gen around it (3 yields; a generator function per request)", make: () => () => Effect.gen(function* () {
    const a = yield* io
    const b = yield* io
    return a + b + (yield* Effect.succeed(0))
  }) },
  { name: "+ Effect.gen around it (3 yields; the body defined once)", make: () => () => Effect.gen(twoSuspensions) },
  { name: '+ Effect.fn("bench.request") around it (3 yields, a span)', make: () => () => namedFn() },
  { name: '+ Effect.fn("bench.request"), References.TracerEnabled false', make: () => () => namedFn(), runtime: "tracer disabled" },
  { name: "+ Effect.fn around it, unnamed (3 yields)", make: () => () => unnamedFn() },
  { name: "+ Effect.fnUntraced around it (3 yields)", make: () => () => untracedFn() },
  // A check order of nine steps that decide at once
  { name: PLAIN_CHECKS, make: () => () => plainCalls(resolvedAndSent) },
  { name: "check order: 9 decided steps chained by Effect.flatMap", make: () => () => byFlatMap(resolvedAndSent), against: PLAIN_CHECKS },
  { name: "check order: 9 decided steps chained by Effect.flatMapEager", make: () => () => byFlatMapEager(resolvedAndSent), against: PLAIN_CHECKS },
  { name: "check order: 9 decided steps in one Effect.fnUntraced", make: () => () => inFnUntraced(resolvedAndSent), against: PLAIN_CHECKS },
  { name: "check order: 9 decided steps in one Effect.fnUntracedEager", make: () => () => inFnUntracedEager(resolvedAndSent), against: PLAIN_CHECKS },
  { name: 'check order: 9 decided steps in one Effect.fn("bench.checkOrder")', make: () => () => inFn(resolvedAndSent), against: PLAIN_CHECKS },
  { name: "check order: 9 decided steps in one Effect.gen (body per request)", make: () => () => inGen(resolvedAndSent), against: PLAIN_CHECKS },
  { name: "check order: 9 Effect.sync steps in one Effect.fnUntraced", make: () => () => syncedInFnUntraced(resolvedAndSent), against: PLAIN_CHECKS },
  { name: "+ 10 more flatMaps", make: () => () => {
    let effect: Effect.Effect<number, StaleResolve> = request
    for (let i = 0; i < 10; i++) effect = Effect.flatMap(effect, (n) => Effect.succeed(n + 1))
    return effect
  } },
  // Retries
  { name: "+ Effect.retry(RE_RESOLVE), no retry", make: () => () => Effect.retry(request, STALE_RETRY) },
  { name: "+ catchTag recursion (the hand-written retry)", make: () => () => Effect.catchTag(request, "StaleResolve", () => request) },
  { name: ONE_RETRY, make: () => () => {
    const attempt = staleOnce()
    return Effect.catchTag(attempt, "StaleResolve", () => attempt)
  } },
  { name: "one retry (stale once): Effect.retry(RE_RESOLVE)", make: () => () => Effect.retry(staleOnce(), STALE_RETRY), against: ONE_RETRY },
  { name: "+ Effect.repeat(Schedule.recurs(0)) (a repeat driver, one run)", make: () => () => Effect.repeat(request, Schedule.recurs(0)) },
  // Errors
  { name: "+ catchTags, two tags (as Deliver.ts ends)", make: () => () => Effect.catchTags(forward, {
    Refused: () => Effect.succeed(0),
    ConnectFailed: () => Effect.succeed(0)
  }) },
  { name: "+ catchTags, 10 tags, exhaustive; success path", make: () => () => Effect.catchTags(admitted, answers) },
  { name: FAILED_CAUGHT, make: () => () => Effect.catch(refused, () => Effect.succeed(403)) },
  { name: "refused after the request, catchTags, 10 tags, exhaustive", make: () => () => Effect.catchTags(refused, answers), against: FAILED_CAUGHT },
  { name: "refused after the request, the error made once, Effect.catch", make: () => () => Effect.catch(refusedWithMade, () => Effect.succeed(403)), against: FAILED_CAUGHT },
  // Time
  { name: "+ Effect.timeout(30 s)", make: () => () => Effect.timeout(request, Duration.seconds(30)) },
  { name: "+ a Deadlines timer started and cancelled", make: ({ deadlines }) => () => Effect.suspend(() => {
    const timer = deadlines.timer(() => undefined)
    timer.start(30_000)
    return Effect.ensuring(request, Effect.sync(() => timer.cancel()))
  }) },
  { name: "+ the wall clock's time first (Clock.currentTimeMillis)", make: () => () => Effect.flatMap(Clock.currentTimeMillis, () => request) },
  { name: "+ the registry clock's time first (a sampled reading)", make: ({ registryClock }) => () => Effect.flatMap(registryClock.now, () => request) },
  { name: "+ Effect.acquireRelease-style ensuring (a finalizer)", make: () => () => Effect.ensuring(request, Effect.void) },
  // Context
  { name: "+ a Context.Reference read first (its default)", make: () => () => Effect.flatMap(Setting, () => request) },
  { name: GEN_REQUEST, make: () => () => requestOnly() },
  { name: "Effect.fnUntraced: yield* a Context.Reference (its default), then the request", make: () => () => readsReference(), against: GEN_REQUEST },
  { name: "Effect.fnUntraced: yield* a Context.Service, then the request", make: () => () => readsService(), against: GEN_REQUEST },
  { name: "+ Effect.provideService of a Context.Reference around it (was Effect.locally)", make: () => () => Effect.provideService(request, Setting, 1) },
  { name: "+ Effect.provideService of a Context.Service around it", make: () => () => Effect.provideService(request, BenchService, benchService) },
  // Tracing
  { name: SPAN, make: () => () => Effect.withSpan(request, "bench.span") },
  { name: "+ Effect.withSpan, References.TracerEnabled false", make: () => () => Effect.withSpan(request, "bench.span"), runtime: "tracer disabled", against: SPAN },
  { name: "+ Effect.withSpan, no tracer provided, captureStackTrace: false", make: () => () => Effect.withSpan(request, "bench.span", NO_STACK), against: SPAN },
  { name: "+ Effect.withSpan, TracerEnabled false, captureStackTrace: false", make: () => () => Effect.withSpan(request, "bench.span", NO_STACK), runtime: "tracer disabled", against: SPAN }
]
