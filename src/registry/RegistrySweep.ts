// The sweep that runs beside the registry (docs/registry-api.md "Ended rows and the sweep"): every
// half lease, so that ended rows go within two leases.
import { Duration, Effect, Schedule } from "effect"
import type { RegistryService } from "./Registry.js"

/** Ended rows go within two leases: the sweep runs every half lease. */
export const sweepSchedule = (leaseMs: number) => Schedule.spaced(Duration.millis(leaseMs / 2))

/**
 * Runs the sweep on its schedule for as long as the scope lasts. A failed run is logged; so is a
 * defect (an unexpected reply from Redis), and the next run is tried all the same.
 */
export const sweepForever = (registry: RegistryService) =>
  registry.sweep.pipe(
    // Why the registry is down is logged once, where it is noticed (RedisHealth.ts, RegistryClock.ts).
    Effect.catch((error) => Effect.logDebug("registry sweep failed").pipe(Effect.annotateLogs({ error: error._tag }))),
    Effect.catchDefect((defect) => Effect.logError("registry sweep failed", defect)),
    Effect.repeat(sweepSchedule(registry.leaseMs)),
    Effect.forkScoped
  )
