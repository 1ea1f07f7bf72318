// The order in which a registration reaches the buckets (docs/proxy.md "Hostname-aware mode"):
// one that names hostnames goes to bucket 0 first, which serializes racing bindings.
import { Effect } from "effect"
import type { RegistryUnavailable } from "../Errors.js"
import type { RegisterOutcome, WorkerRegistration } from "./Domain.js"
import { reachedAll, type FanOut, type RegistryBackend } from "./RegistryBackend.js"

/**
 * A registration that names hostnames, in bucket 0 first and in the other buckets only when its
 * bindings stood there. Every bucket decides bindings alike, but two registrations racing through
 * two Pinboards (equal epochs, different envs) could reach the buckets in different orders and
 * leave them bound to different envs. Bucket 0 serializes them: the loser writes nothing.
 */
export const registerBindingFirst = (
  backend: RegistryBackend,
  at: number,
  registration: WorkerRegistration
): Effect.Effect<FanOut<RegisterOutcome>, RegistryUnavailable> =>
  Effect.gen(function* () {
    const first = yield* backend.register(at, registration, [0])
    yield* reachedAll(first)
    if (first.reached.some(([, outcome]) => outcome._tag === "BindingConflict")) return first
    const rest = yield* backend.register(at, registration, Array.from({ length: backend.buckets - 1 }, (_, i) => i + 1))
    return { ...rest, reached: [...first.reached, ...rest.reached] }
  })
