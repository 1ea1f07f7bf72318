// The registry's one clock (docs/protocol.md "Time"): every `now` the registry stores or judges
// by (lease ends, lease left, cold-start marks, epoch floors, wind-down deadlines, nack
// windows, the sweep) comes from here, never from this process's wall clock.
//
// On Redis it is the Redis `TIME`, sampled every 2 s and carried on between samples by the
// monotonic clock, so a request costs no Redis call. A process whose wall clock is further
// than `registry.maxClockOffsetMs` from it, or that has no fresh sample, gets an error instead
// of a time: it makes no registry writes until it is back in bound. The embedded registry
// lives in this process, so its clock is the process's own `Clock`. Either way the time comes
// through Effect's `Clock`, and TestClock drives it in tests.
import { Clock, Context, Duration, Effect, Layer, Schedule } from "effect"
import { AppConfig } from "../AppConfig.js"
import { usesEmbeddedRegistry } from "../Config.js"
import { ClockOffsetTooLarge, RegistryUnavailable } from "../Errors.js"
import { Metrics } from "../observe/Metrics.js"
import { monotonicMicros } from "../serving/Monotonic.js"
import { Backend } from "./Backend.js"
import type { RegistryBackend } from "./RegistryBackend.js"
import { carriedOn, readClock, sampleOf, type ClockReading, type ClockSample } from "./ClockReading.js"

export interface RegistryClockService {
  /** The registry's time now, in ms. */
  readonly now: Effect.Effect<number, RegistryUnavailable | ClockOffsetTooLarge>
  /** What `now` would tell, without failing: for `/readyz`. */
  readonly reading: Effect.Effect<ClockReading>
}

/** Re-sampled this often while samples come (docs/protocol.md "Time")... */
export const CLOCK_SAMPLE_EVERY_MS = 2_000
/** ...and this often while they do not, so that a registry back up is learnt soon. */
export const CLOCK_SAMPLE_AGAIN_MS = 250
/** A sample older than three rounds is not trusted: the registry has not been reached since. */
export const CLOCK_SAMPLE_STALE_MS = 3 * CLOCK_SAMPLE_EVERY_MS
/** Tries per round for a sample whose round trip is short enough. */
const TRIES_PER_ROUND = 3

/** Rounds for ever, each after the wait the one before answered. */
const SAMPLING = Schedule.identity<number>().pipe(Schedule.addDelay(({ output: waitMs }) => Effect.succeed(Duration.millis(waitMs))))

/** The clock of a registry held in this process: the process's own. */
export const localRegistryClock: RegistryClockService = {
  now: Clock.currentTimeMillis,
  reading: Effect.map(Clock.currentTimeMillis, (nowMs) => ({ _tag: "InBound", nowMs, offsetMs: 0 }))
}

/** The outcome of `now` for a reading. */
const nowOf = (reading: ClockReading): Effect.Effect<number, RegistryUnavailable | ClockOffsetTooLarge> => {
  switch (reading._tag) {
    case "InBound":
      return Effect.succeed(reading.nowMs)
    case "OutOfBound":
      return Effect.fail(new ClockOffsetTooLarge({ offsetMs: reading.offsetMs }))
    case "Unsampled":
      return Effect.fail(new RegistryUnavailable({ cause: "the registry's time has not been sampled" }))
  }
}

const logChange = (to: ClockReading, maxOffsetMs: number) => {
  if (to._tag === "OutOfBound") {
    return Effect.logWarning("clock offset from the registry too large: no registry writes until it is back in bound", {
      offsetMs: Math.round(to.offsetMs),
      maxClockOffsetMs: maxOffsetMs
    })
  }
  if (to._tag === "Unsampled") return Effect.logWarning("registry time not sampled: no registry writes until a sample")
  return Effect.logInfo("clock back in bound with the registry: registry writes resume", { offsetMs: Math.round(to.offsetMs) })
}

/**
 * Samples `backend.time` now and every round after for as long as the scope lasts. A sample
 * counts when its round trip is at most half the bound (it is then off by a quarter at most).
 * The process's clocks are the `Clock` in context when it is made.
 */
export const makeSampledClock = (backend: RegistryBackend, maxOffsetMs: number) =>
  Effect.gen(function* () {
    const metrics = yield* Metrics
    const clock = yield* Clock.Clock
    const bounds = { maxOffsetMs, staleMs: CLOCK_SAMPLE_STALE_MS }
    let sample: ClockSample | undefined
    /** The state last logged: a start in bound says nothing. */
    let told: ClockReading["_tag"] = "InBound"

    const tryOnce = Effect.suspend(() => {
      const sent = monotonicMicros(clock)
      return Effect.map(backend.time, (registryMs) => {
        const received = monotonicMicros(clock)
        return received - sent <= (maxOffsetMs / 2) * 1000 ? sampleOf(sent, received, Math.round(registryMs * 1000)) : undefined
      })
    })
    /** The first good sample of up to TRIES_PER_ROUND tries, or undefined. */
    const firstGood = Effect.gen(function* () {
      let fresh: ClockSample | undefined
      for (let tries = 0; fresh === undefined && tries < TRIES_PER_ROUND; tries++) {
        fresh = yield* tryOnce.pipe(Effect.orElseSucceed(() => undefined))
      }
      return fresh
    })

    const readNow = () => readClock(sample, monotonicMicros(clock), clock.currentTimeMillisUnsafe(), bounds)
    const reading = Effect.sync(readNow)

    /** One round: a fresh sample if one comes; logs and counts a change of state. Answers the wait before the next. */
    const round = Effect.gen(function* () {
      const fresh = yield* firstGood
      if (fresh !== undefined) {
        const movedMs = sample === undefined ? 0 : (fresh.registryMicros - carriedOn(sample, fresh.monotonicMicros)) / 1000
        if (Math.abs(movedMs) > maxOffsetMs) {
          // A Redis failover to a node with another clock, or a step of the monotonic clock.
          yield* Effect.logWarning("the registry's time moved between two samples", { movedMs: Math.round(movedMs) })
        }
        sample = fresh
      }
      const now = yield* reading
      if (now._tag !== "Unsampled") metrics.clockOffset(now.offsetMs)
      if (now._tag !== told) {
        if (now._tag === "OutOfBound") metrics.clockOutOfBound()
        yield* logChange(now, maxOffsetMs)
        told = now._tag
      }
      return fresh === undefined ? CLOCK_SAMPLE_AGAIN_MS : CLOCK_SAMPLE_EVERY_MS
    })

    const firstWait = yield* round
    yield* Effect.andThen(Effect.sleep(firstWait), Effect.repeat(round, SAMPLING)).pipe(Effect.forkScoped)
    return { now: Effect.suspend(() => nowOf(readNow())), reading } satisfies RegistryClockService
  })

export class RegistryClock extends Context.Service<RegistryClock, RegistryClockService>()("pinboard/RegistryClock") {
  /**
   * On Redis, its time sampled, within `registry.maxClockOffsetMs` of this process's wall clock;
   * for the embedded registry, which lives in this process, the process's own `Clock`.
   */
  static readonly layer: Layer.Layer<RegistryClock, never, Backend | Metrics | AppConfig> = Layer.effect(
    RegistryClock,
    Effect.flatMap(AppConfig, (config) =>
      usesEmbeddedRegistry(config)
        ? Effect.succeed(localRegistryClock)
        : Effect.flatMap(Backend, (backend) => makeSampledClock(backend, config.registry.maxClockOffsetMs))
    )
  )

  /** In tests: `localRegistryClock` puts the registry on TestClock, on either backend. */
  static readonly layerTest = (clock: RegistryClockService): Layer.Layer<RegistryClock> => Layer.succeed(RegistryClock, clock)
}
