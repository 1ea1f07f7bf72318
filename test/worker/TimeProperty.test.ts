// Time as a property: the worker library's lease keeper and activations, over the registry
// (embedded; the model-based tests hold the Redis layer to it), with TestClock advancing by
// random amounts between random steps: requests through Pinboard's resolve, links to the
// registry going down or slow (answers lost on the way back too), crashes, restarts, graceful
// stops, idle releases, bucket wipes and sweeps. At every step:
//   - no id is held by two workers, and a new placement finds nobody holding its id: a worker
//     drops an activation before Pinboard could place the id elsewhere;
//   - a worker holds activations only while the registry's lease of its incarnation runs
//     (or its bucket was wiped: then the cold start keeps the id unplaced for a lease);
//   - a heartbeat that reaches the registry after the lease lapsed is answered 410, and the
//     worker registers again holding nothing.
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Clock, Effect, Exit, Result, Scope } from "effect"
import { TestClock } from "effect/testing"
import type { RegistryPolicy } from "../../src/registry/Domain.js"
import { makeMemoryBackend } from "../../src/registry/Memory.js"
import type { RegistryService } from "../../src/registry/Registry.js"
import { makeRegistry } from "../../src/registry/RegistryOnBackend.js"
import { Activations, type Refusal } from "../../src/worker/Activations.js"
import { keepLease, type Lease } from "../../src/worker/Lease.js"
import type { RegistryClient } from "../../src/worker/RegistryClient.js"
import * as fc from "../support/Arbitraries.js"
import { scaled } from "../support/Time.js"
import { flush } from "../support/Turns.js"

const LEASE_MS = 3000
const BUCKETS = 2
const T0 = 1_800_000_000_000
const policy: RegistryPolicy = { leaseMs: LEASE_MS, balanceFactor: 1.25, nackThreshold: 2, nackWindowMs: LEASE_MS }
const WORKERS = ["w1", "w2", "w3"] as const
const IDS = ["a", "b", "c", "d", "e", "f"]
const NAMESPACE = "/n"
const DEEP = process.env.PINBOARD_DEEP === "1"
const RUNS = DEEP ? { numRuns: 1000, maxLength: 200, seconds: 1800 } : { numRuns: 40, maxLength: 60, seconds: 120 }
const MIN_RUNS = 15

type Link = { readonly state: "up" } | { readonly state: "down" } | { readonly state: "slow"; readonly delayMs: number }

type Step =
  | { readonly op: "advance"; readonly ms: number }
  | { readonly op: "request"; readonly id: string; readonly affinity: string }
  | { readonly op: "link"; readonly worker: string; readonly link: Link }
  | { readonly op: "crash" | "start" | "stop" | "idle"; readonly worker: string }
  | { readonly op: "wipe"; readonly bucket: number }
  | { readonly op: "sweep" }

const worker = fc.constantFrom(...WORKERS)
const step: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant("advance"), ms: fc.oneof(fc.integer({ min: 1, max: 1200 }), fc.integer({ min: 1, max: 2 * LEASE_MS })) }), weight: 8 },
  { arbitrary: fc.record({ op: fc.constant("request"), id: fc.constantFrom(...IDS), affinity: fc.constantFrom("10.0.0.1", "10.0.0.2", "10.0.0.3") }), weight: 8 },
  {
    arbitrary: fc.record({
      op: fc.constant("link"),
      worker,
      link: fc.oneof(
        fc.constant<Link>({ state: "up" }),
        fc.constant<Link>({ state: "down" }),
        fc.map(fc.integer({ min: 1, max: 2 * LEASE_MS }), (delayMs): Link => ({ state: "slow", delayMs }))
      )
    }),
    weight: 5
  },
  { arbitrary: fc.record({ op: fc.constantFrom("crash", "stop"), worker }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant("start"), worker }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant("idle"), worker }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant("wipe"), bucket: fc.integer({ min: 0, max: BUCKETS - 1 }) }), weight: 1 },
  { arbitrary: fc.constant({ op: "sweep" }), weight: 1 }
)

/** What the runs covered, printed after them and required to be more than nothing. */
const seen = new Map<string, number>()
const count = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1)

/** A worker process: its lease keeper and activations, alive until its scope closes. */
interface Process {
  readonly scope: Scope.Closeable
  readonly lease: Lease
  readonly activations: Activations
}

interface WorkerState {
  link: Link
  process: Process | undefined
  /** The registry's lease end for the incarnation it last granted, as its answers set it. */
  granted: { incarnation: string; until: number; wiped: boolean } | undefined
  /** Incarnations whose heartbeat was answered 410 (and the worker heard it): none may heartbeat again. */
  readonly lost: Set<string>
  /**
   * Incarnations whose deregistration reached the registry: a heartbeat of theirs sent before it
   * and still on its way (a slower link then) finds no lease there, lapsed or not.
   */
  readonly deregistered: Set<string>
  /** Counts the processes started and ended: a call of a process that has ended never reaches the registry. */
  generation: number
}

const holders = (workers: Map<string, WorkerState>, id: string): Array<string> =>
  [...workers].flatMap(([name, w]) => (w.process?.activations.find(NAMESPACE, id) === undefined ? [] : [name]))

const heldIds = (w: WorkerState): Array<string> => IDS.filter((id) => w.process?.activations.find(NAMESPACE, id) !== undefined)

/** Holding an id, or ready to take one (what the lease keeper tells the activations). */
const trusts = (w: WorkerState): boolean =>
  heldIds(w).length > 0 || IDS.some((id) => w.process?.lease.healthyFor({ env: "", namespace: NAMESPACE, id }) === true)

/** One run: a fresh registry and fleet, the steps, the checks after each. */
const runSteps = (steps: ReadonlyArray<Step>) =>
  Effect.gen(function* () {
    const context = yield* Effect.context<never>()
    const clock = yield* Clock.Clock
    const now = () => clock.currentTimeMillisUnsafe()
    const backend = makeMemoryBackend(BUCKETS, policy)
    const registry: RegistryService = makeRegistry(backend, policy, () => "wind_down")
    /** What the registry calls saw wrong: they run in the workers' fibers, so the test reads them after each step. */
    const violations: Array<string> = []
    const workers = new Map<string, WorkerState>(WORKERS.map((name) => [name, { link: { state: "up" }, process: undefined, granted: undefined, lost: new Set(), deregistered: new Set(), generation: 0 }]))

    /**
     * A registry call over the worker's link: lost when the link is down at either end, late when
     * it is slow, and gone with its process (`generation`: the process that made it).
     */
    const overLink = <A>(name: string, generation: number, call: (w: WorkerState) => Effect.Effect<A, unknown>): Promise<A> => {
      const w = workers.get(name)!
      const delay = () => (w.link.state === "slow" ? Effect.sleep(w.link.delayMs / 2) : Effect.void)
      // Read afresh at each end of the crossing: the link may change while a call is on its way.
      const down = () => w.link.state === "down" || w.generation !== generation
      const crossing = Effect.gen(function* () {
        if (down()) return yield* Effect.fail(new Error("connection refused"))
        yield* delay()
        if (down()) return yield* Effect.fail(new Error("connection reset"))
        const answer = yield* Effect.result(call(w))
        yield* delay()
        if (down()) return yield* Effect.fail(new Error("answer lost"))
        return yield* Effect.fromResult(answer)
      })
      return Effect.runPromiseWith(context)(crossing)
    }

    /**
     * At the instant the registry's lease runs out unrenewed, the worker must trust it no more
     * and hold nothing: checked on TestClock at that instant, not only between steps.
     */
    const watchLapse = (name: string, granted: NonNullable<WorkerState["granted"]>) => {
      const until = granted.until
      Effect.runForkWith(context)(
        Effect.sleep(until - now()).pipe(
          Effect.andThen(
            Effect.sync(() => {
              const w = workers.get(name)!
              if (w.granted !== granted || granted.until !== until || granted.wiped || w.process?.lease.incarnation() !== granted.incarnation) return
              if (trusts(w)) violations.push(`${name} still trusts its lease at ${until - T0}, when the registry's ran out`)
              count("lapse watched")
            })
          )
        )
      )
    }

    const clientOf = (name: string, generation: number): RegistryClient => ({
      register: (status) =>
        overLink(name, generation, (w) =>
          Effect.gen(function* () {
            // Registering again after a 410 or a lapse: everything of the lost incarnation is gone already.
            if (heldIds(w).length > 0) violations.push(`${name} registers again holding ${heldIds(w)}`)
            const answer = yield* registry.register({ worker: name, advertiseUrl: `http://127.0.0.1:1/${name}`, namespaces: [{ namespace: NAMESPACE, hostname: "", env: "" }], callerKey: undefined, ...status })
            w.granted = { incarnation: answer.incarnation, until: answer.leaseExpiresAt, wiped: false }
            watchLapse(name, w.granted)
            return { incarnation: answer.incarnation, leaseMs: answer.leaseMs, heartbeatMs: answer.heartbeatMs, buckets: answer.buckets, unrenewed: answer.unrenewed }
          })
        ),
      heartbeat: (incarnation, status) =>
        overLink(name, generation, (w) =>
          Effect.gen(function* () {
            if (w.lost.has(incarnation)) violations.push(`${name} heartbeats after a 410`)
            const granted = w.granted?.incarnation === incarnation ? w.granted : undefined
            const lapsed = granted === undefined || now() >= granted.until
            const answer = yield* Effect.result(registry.heartbeat(name, { incarnation, ...status, degraded: false }))
            if (lapsed) {
              // A 410 always follows a lapse, and the lapsed worker holds nothing by then.
              if (Result.isSuccess(answer)) violations.push(`${name} renewed at ${now()} after its lease lapsed`)
              if (heldIds(w).length > 0) violations.push(`${name} holds ${heldIds(w)} past its lease`)
              count("410 after a lapse")
            } else if (!granted.wiped && !w.deregistered.has(incarnation) && Result.isFailure(answer)) {
              violations.push(`${name} lost a lease that had not lapsed`)
            }
            if (Result.isFailure(answer)) {
              if (answer.failure._tag !== "LeaseLost") return yield* Effect.fail(answer.failure)
              return { _tag: "LeaseLost" as const }
            }
            if (granted !== undefined) {
              granted.until = answer.success.leaseExpiresAt
              watchLapse(name, granted)
            }
            return { _tag: "Renewed" as const, windDown: answer.success.windDown, unrenewed: answer.success.unrenewed }
          })
        ).then((answer) => {
          // Told 410 (an answer lost on its way back tells the worker nothing).
          if (answer._tag === "LeaseLost") workers.get(name)!.lost.add(incarnation)
          return answer
        }),
      release: (placement, epoch) =>
        overLink(name, generation, () => Effect.map(registry.release(placement, epoch), (outcome) => outcome._tag === "Done")),
      deregister: (incarnation) =>
        overLink(name, generation, (w) => Effect.tap(registry.deregister(name, incarnation), () => Effect.sync(() => void w.deregistered.add(incarnation))))
    })

    const start = (name: string) =>
      Effect.gen(function* () {
        const w = workers.get(name)!
        if (w.process !== undefined) return
        const client = clientOf(name, ++w.generation)
        const scope = yield* Scope.make()
        const activations: Activations = new Activations(new Map([[NAMESPACE, { activate: () => ({}), idleTimeoutMs: 1 }]]), {
          worker: name,
          now,
          release: (placement, epoch) => client.release(placement, epoch),
          callAs: () => () => Promise.reject(new Error("no calls here")),
          log: () => undefined
        })
        const lease = yield* Scope.provide(
          keepLease(client, {
            drop: (reason, which) => {
              count(`dropped: ${reason}`)
              return Effect.promise(() => (which === undefined ? activations.dropAll(reason) : activations.dropWhere(which, reason)))
            },
            windDown: () => Effect.void,
            status: () => ({ headroom: 5, draining: false })
          }),
          scope
        )
        w.process = { scope, lease, activations }
      })

    /** A process gone: its fibers stop and its memory with them; a graceful stop deregisters first. */
    const end = (name: string, graceful: boolean) =>
      Effect.gen(function* () {
        const w = workers.get(name)!
        const process = w.process
        if (process === undefined) return
        w.process = undefined
        const generation = w.generation
        // The process exits: its calls still on the way go nowhere (once its deregistration is through).
        const exit = Effect.sync(() => void (w.generation === generation && w.generation++))
        if (graceful) {
          yield* Effect.promise(() => process.activations.dropAll("shutdown"))
          yield* Effect.forkChild(Effect.ensuring(process.lease.deregister, exit))
        } else {
          yield* exit
        }
        yield* Scope.close(process.scope, Exit.void)
      })

    /** Pinboard's part: resolve, forward to the owner, and on a refusal nack it and place once more elsewhere. */
    const request = (id: string, affinity: string, excluded: ReadonlyArray<string> = []): Effect.Effect<void> =>
      Effect.gen(function* () {
        const placed = yield* Effect.result(registry.resolve({ env: "", namespace: NAMESPACE, id, hostname: "", caller: undefined, affinity, excluded }))
        if (Result.isFailure(placed)) return void count(`refused: ${placed.failure._tag}`)
        const { worker: owner, epoch, isNew } = placed.success
        count(isNew ? "placed anew" : "forwarded")
        // The decisive instant: Pinboard could send the id elsewhere only if nobody holds it.
        if (isNew) expect(holders(workers, id), `${id} placed on ${owner} while held`).toEqual([])
        const process = workers.get(owner)!.process
        if (process === undefined) return void count("owner down")
        const entered: Awaited<ReturnType<Activations["enter"]>> = yield* Effect.promise(() =>
          process.activations.enter({ env: "", namespace: NAMESPACE, id, epoch, hostname: undefined }, process.lease.healthyFor)
        )
        if (typeof entered === "string") {
          count(`worker refused: ${entered satisfies Refusal}`)
          yield* Effect.ignore(registry.nack(owner))
          if (excluded.length === 0) yield* request(id, affinity, [owner])
          return
        }
        expect(entered.epoch, `${owner} serves ${id} at another epoch`).toBe(epoch)
        process.activations.leave(entered)
        count("served")
      })

    /** The registry's own view of who may hold what, checked after every step. */
    const checkHolders = () => {
      expect(violations).toEqual([])
      for (const id of IDS) expect(holders(workers, id).length, `${id} held twice`).toBeLessThanOrEqual(1)
      for (const [name, w] of workers) {
        if (!trusts(w)) continue
        const granted = w.granted
        expect(granted !== undefined && w.process?.lease.incarnation() === granted.incarnation, `${name} trusts an incarnation the registry did not grant`).toBe(true)
        if (!granted!.wiped) expect(now(), `${name} trusts its lease past the registry's`).toBeLessThan(granted!.until)
      }
    }

    /**
     * TestClock wakes fibers one instant at a time; the registry calls and activations go on in
     * promise jobs in between: a few event-loop turns let them reach their next wait, and a
     * zero step runs whatever is due at this instant.
     */
    const quiesce = Effect.andThen(flush, TestClock.adjust(0))

    // Whatever happens, no worker outlives its run.
    yield* Effect.addFinalizer(() => Effect.forEach(WORKERS, (name) => end(name, false)))
    for (const name of WORKERS) yield* start(name)
    yield* quiesce
    yield* TestClock.adjust(LEASE_MS)
    yield* quiesce
    for (const s of steps) {
      switch (s.op) {
        case "advance":
          yield* TestClock.adjust(s.ms)
          break
        case "request":
          yield* request(s.id, s.affinity)
          break
        case "link":
          workers.get(s.worker)!.link = s.link
          break
        case "crash":
          yield* end(s.worker, false)
          break
        case "stop":
          yield* end(s.worker, true)
          break
        case "start":
          yield* start(s.worker)
          break
        case "idle": {
          const process = workers.get(s.worker)!.process
          if (process !== undefined) yield* Effect.forkChild(Effect.promise(() => process.activations.sweepIdle()))
          break
        }
        case "wipe":
          backend.wipe(s.bucket)
          for (const w of workers.values()) if (w.granted !== undefined) w.granted.wiped = true
          count("wiped")
          break
        case "sweep":
          yield* Effect.ignore(registry.sweep)
          break
      }
      yield* quiesce
      checkHolders()
    }
    // The leases granted last run out, so that their instants are checked too.
    yield* TestClock.adjust(LEASE_MS)
    yield* quiesce
    checkHolders()
  })

describe("time as a property: lease keeper, activations and registry together", () => {
  it.effect(
    "at every step: one holder per id, placements only where nobody holds, 410 after every lapse",
    () =>
      Effect.gen(function* () {
        seen.clear()
        yield* TestClock.setTime(T0)
        // A run takes a second or more of real time (TestClock waits for the fibers at every instant
        // it wakes), so the runs stop at a time budget: at least MIN_RUNS must fit in it. Past it,
        // the runs left (and the shrinks of a failure) pass without running.
        const deadline = performance.now() + scaled(RUNS.seconds * 1000)
        let runs = 0
        let interrupted = false
        yield* fc.assertEffect(
          Arbitrary.array(step, { minLength: 10, maxLength: RUNS.maxLength }),
          (steps) =>
            Effect.suspend(() => {
              if (performance.now() > deadline) {
                interrupted = true
                return Effect.void
              }
              runs++
              // A failed expectation is a defect: as the property's failure, it is shrunk and reported with the steps.
              return Effect.scoped(runSteps(steps))
            }),
          // The size grows with the runs, from 0 to this (Effect's own array, not fc.array, grows with it):
          // every run but the first may take up to maxLength steps.
          { runs: RUNS.numRuns, size: RUNS.maxLength * (RUNS.numRuns - 1) }
        )
        console.log(`time property: ${runs} runs of up to ${RUNS.maxLength} steps${interrupted ? " (time budget reached)" : ""}; ${[...seen].sort((a, b) => b[1] - a[1]).map(([what, n]) => `${what} ${n}`).join(", ")}`)
        expect(runs).toBeGreaterThanOrEqual(MIN_RUNS)
        // The runs reached what they are about.
        for (const what of ["lapse watched", "placed anew", "served", "410 after a lapse", "dropped: lease-unhealthy", "dropped: lease-lost", "worker refused: lease-unhealthy"]) {
          expect(seen.get(what) ?? 0, what).toBeGreaterThan(0)
        }
      }),
    scaled((RUNS.seconds + 60) * 1000)
  )
})
