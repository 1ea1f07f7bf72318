// The reference model's placement (docs/protocol.md "Resolution" steps 5 and 6) read off a bucket of the embedded
// registry: the model-based tests hold the Redis layer's answers to it.
import { memberKey, type RegistryPolicy } from "../../src/registry/Domain.js"
import { servesHostname } from "../../src/registry/Hostnames.js"
import type { BucketState } from "../../src/registry/BucketState.js"
import { byWorkerId, choosePlacement, isPlaceable, type Candidate } from "../../src/registry/Placement.js"

/** Step 5 on the reference state: the workers a new placement may go to at `now`, in worker id order. */
export const modelCandidates = (
  state: Readonly<BucketState>,
  query: { readonly env: string; readonly namespace: string; readonly hostname: string; readonly excluded: ReadonlyArray<string> },
  now: number,
  policy: RegistryPolicy
): Array<Candidate> =>
  [...(state.members.get(memberKey(query.env, query.namespace)) ?? [])]
    .map((w) => state.workers.get(w)!)
    // No placement on another hostname's worker.
    .filter((record) => query.hostname === "" || servesHostname(record.namespaces, query.env, query.namespace, query.hostname))
    .filter((record) => isPlaceable(record, now, policy, query.excluded))
    .map((record) => ({ worker: record.worker, headroom: record.headroom }))
    .sort(byWorkerId)

/** Step 6 on the reference: the model's choice among `candidates`; undefined when there is none. */
export const modelChoice = (
  candidates: ReadonlyArray<Candidate>,
  query: { readonly caller: string | undefined; readonly affinity: string; readonly r1: number; readonly r2: number },
  policy: RegistryPolicy
): string | undefined =>
  choosePlacement({ candidates, caller: query.caller, affinity: query.affinity, balanceFactor: policy.balanceFactor, r1: query.r1, r2: query.r2 })
