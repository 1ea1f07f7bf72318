// The registry service over a backend (docs/registry-api.md, docs/protocol.md "Resolution"):
// bucket hashing, `now` from the registry's one clock (RegistryClock.ts) and the two random
// numbers from Random around the embedded backend of Memory.ts or Redis.ts's.
import { Effect, Random } from "effect"
import { BindingHeldByAnotherEnv, LeaseLost, NotPlaced } from "../Errors.js"
import { bucketOf } from "../contract/Bucket.js"
import type { PlacementKey, RegistryPolicy, ResolveQuery, WindDownDue } from "./Domain.js"
import { bindingKey } from "./Hostnames.js"
import type { TakeoverOf } from "./Policy.js"
import { registerBindingFirst } from "./RegistrationOrder.js"
import type { RegistryService } from "./Registry.js"
import { reachedAll, reachedAny, type RegistryBackend } from "./RegistryBackend.js"
import { localRegistryClock, type RegistryClockService } from "./RegistryClock.js"
import { allWorkers, placementsHeldBy } from "./RegistryPages.js"
import { placedOrRefused } from "./ResolveRefusals.js"

// Half-open, as Effect 3 drew them: [min, max).
const hex32 = Random.nextIntBetween(0, 0x10000, { halfOpen: true }).pipe(
  Effect.map((n) => n.toString(16).padStart(4, "0")),
  Effect.replicate(4),
  Effect.all
)
const newIncarnation = Effect.map(hex32, (parts) => parts.join(""))

const byDeadline = (a: WindDownDue, b: WindDownDue): number =>
  a.deadline - b.deadline || (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/** The two random numbers of a placement: 26-bit halves of one draw, exact in both layers. */
const DICE = 2 ** 26
const twoRandomNumbers = Random.nextIntBetween(0, DICE * DICE, { halfOpen: true })

/** Affinity values are header or cookie text; a line break never reaches the registry. */
const oneLine = (text: string): string => (text.includes("\n") ? text.replaceAll("\n", " ") : text)

/** `takeoverOf` is the configuration's (Config.ts `takeoverOf`): each env's takeover, its default included. */
export const makeRegistry = (
  backend: RegistryBackend,
  policy: RegistryPolicy,
  takeoverOf: TakeoverOf,
  clock: RegistryClockService = localRegistryClock
): RegistryService => {
  const now = clock.now
  const bucket = (key: PlacementKey) => bucketOf(key.env, key.namespace, key.id, backend.buckets)
  /** bindingKey(hostname, namespace) -> the env last learnt for it (hostname-aware mode). */
  const boundEnvs = new Map<string, string>()
  return {
    leaseMs: policy.leaseMs,
    register: (input) =>
      Effect.gen(function* () {
        const at = yield* now
        const incarnation = yield* newIncarnation
        const registration = { ...input, incarnation }
        const out = yield* Effect.flatMap(
          input.namespaces.some((entry) => entry.hostname !== "") ? registerBindingFirst(backend, at, registration) : backend.register(at, registration),
          reachedAny
        )
        if (out.reached.some(([, outcome]) => outcome._tag === "BindingConflict")) return yield* new BindingHeldByAnotherEnv()
        return {
          worker: input.worker,
          incarnation,
          leaseMs: policy.leaseMs,
          heartbeatMs: Math.floor(policy.leaseMs / 3),
          leaseExpiresAt: at + policy.leaseMs,
          buckets: backend.buckets,
          unrenewed: out.unreached
        }
      }),
    heartbeat: (worker, input) =>
      Effect.gen(function* () {
        const at = yield* now
        const out = yield* Effect.flatMap(backend.heartbeat(at, { worker, ...input }), reachedAny)
        const windDown: Array<WindDownDue> = []
        for (const [, answer] of out.reached) {
          if (answer._tag === "LeaseLost") return yield* new LeaseLost()
          windDown.push(...answer.windDown)
        }
        return { leaseExpiresAt: at + policy.leaseMs, windDown: windDown.sort(byDeadline), unrenewed: out.unreached }
      }),
    deregister: (worker, incarnation) =>
      Effect.flatMap(now, (at) => backend.deregister(at, worker, incarnation)).pipe(Effect.flatMap(reachedAll)),
    resolve: (request) => {
      // In hostname-aware mode the env is the pair's binding, learnt from the registry: any bucket
      // knows it and answers Rebound when the env tried is not it; the id's bucket is then asked.
      const pair = request.hostname === "" ? undefined : bindingKey(request.hostname, request.namespace)
      const resolveIn = (env: string) =>
        Effect.flatMap(now, (at) =>
          Effect.flatMap(twoRandomNumbers, (dice) => {
            const query: ResolveQuery = {
              env,
              namespace: request.namespace,
              id: request.id,
              hostname: request.hostname,
              takeover: takeoverOf(env),
              caller: request.caller,
              affinity: oneLine(request.affinity),
              excluded: request.excluded,
              r1: Math.floor(dice / DICE) / DICE,
              r2: (dice % DICE) / DICE
            }
            return backend.resolve(bucket(query), at, query)
          })
        )
      const env = (pair === undefined ? undefined : boundEnvs.get(pair)) ?? request.env
      return Effect.flatMap(resolveIn(env), (outcome) => {
        if (outcome._tag !== "Rebound" || pair === undefined) return placedOrRefused(outcome, env, policy.leaseMs)
        boundEnvs.set(pair, outcome.env)
        return Effect.flatMap(resolveIn(outcome.env), (again) => placedOrRefused(again, outcome.env, policy.leaseMs))
      })
    },
    release: (key, epoch, owners) => Effect.flatMap(now, (at) => backend.release(bucket(key), at, key, epoch, owners)),
    tag: (key, epoch, value, owners) => Effect.flatMap(now, (at) => backend.tag(bucket(key), at, key, epoch, value, owners)),
    nack: (worker) => Effect.flatMap(now, (at) => backend.nack(at, worker)).pipe(Effect.flatMap(reachedAny), Effect.asVoid),
    beginWindDown: (key, epoch) => Effect.flatMap(now, (at) => backend.beginWindDown(bucket(key), at, key, epoch)),
    placement: (key) =>
      Effect.flatMap(now, (at) => backend.placement(bucket(key), at, key)).pipe(
        Effect.flatMap((view) => (view === undefined ? new NotPlaced() : Effect.succeed(view)))
      ),
    callerPlacement: (key, worker) => Effect.flatMap(now, (at) => backend.callerPlacement(bucket(key), at, key, worker)),
    workers: Effect.flatMap(now, (at) => allWorkers(backend, at)),
    workersPage: (after, limit) => Effect.flatMap(now, (at) => backend.workers(at, after, limit)),
    placementsHeld: (workers) => Effect.flatMap(now, (at) => placementsHeldBy(backend, at, workers)),
    sweep: Effect.flatMap(now, (at) => backend.sweep(at)).pipe(Effect.flatMap(reachedAll)),
    now,
    ping: Effect.asVoid(backend.time),
    clockReading: clock.reading
  }
}
