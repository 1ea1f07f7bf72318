// The workers' wire (docs/protocol.md "Keys of one bucket", docs/registry-api.md): fleet.lua's
// entries, one per membership write (register, heartbeat, deregister, nack) and one reply per
// entry; workers.lua's and held.lua's reads for the API and the fleet page.
import type { BucketHeartbeat, RegisterOutcome, WindDownDue, WorkerHeartbeat, WorkerRegistration, WorkerShown } from "./Domain.js"
import { memberKey } from "./Domain.js"
import { fieldText, isList, namespacesIn, numberIn, unexpected } from "./WireReply.js"

const flag = (value: boolean): string => (value ? "1" : "0")

// fleet.lua: one entry per membership write, one reply per entry --------------------------

export const encodeRegisterEntry = (now: number, r: WorkerRegistration, leaseMs: number): ReadonlyArray<string> => [
  "r",
  String(now),
  r.worker,
  r.incarnation,
  r.advertiseUrl,
  String(now + leaseMs),
  String(r.headroom),
  flag(r.draining),
  JSON.stringify(r.namespaces),
  r.namespaces.map((n) => memberKey(n.env, n.namespace)).join("\n"),
  r.epoch ?? "0",
  r.namespaces.flatMap((n) => (n.hostname === "" ? [] : [`${n.hostname}|${n.namespace}|${n.env}`])).join("\n"),
  r.callerKey ?? ""
]

export const encodeHeartbeatEntry = (now: number, beat: WorkerHeartbeat, leaseMs: number): ReadonlyArray<string> => [
  "h",
  String(now),
  beat.worker,
  beat.incarnation,
  String(now + leaseMs),
  String(beat.headroom),
  flag(beat.draining),
  flag(beat.degraded)
]

export const encodeDeregisterEntry = (now: number, worker: string, incarnation: string): ReadonlyArray<string> => ["d", String(now), worker, incarnation]

export const encodeNackEntry = (now: number, worker: string, nackWindowMs: number): ReadonlyArray<string> => ["n", String(now), worker, String(nackWindowMs)]

export const decodeRegisterReply = (reply: unknown): RegisterOutcome =>
  reply === "OK" ? { _tag: "Registered" } : reply === "conflict" ? { _tag: "BindingConflict" } : unexpected("fleet", reply)

/** Deregister and nack answer "OK" whatever they found. */
export const decodeDoneReply = (reply: unknown): void => {
  if (reply !== "OK") unexpected("fleet", reply)
}

/** Fields per wind-down entry of a heartbeat reply: env, namespace, id, epoch, deadline. */
const WIND_DOWN_FIELDS = 5

export const decodeHeartbeatReply = (reply: unknown): BucketHeartbeat => {
  if (!isList(reply)) return unexpected("fleet", reply)
  if (reply[0] === "lost" && reply.length === 1) return { _tag: "LeaseLost" }
  if (reply[0] !== "renewed" || (reply.length - 1) % WIND_DOWN_FIELDS !== 0) return unexpected("fleet", reply)
  const windDown: Array<WindDownDue> = []
  for (let i = 1; i < reply.length; i += WIND_DOWN_FIELDS) {
    windDown.push({
      env: fieldText(reply[i]),
      namespace: fieldText(reply[i + 1]),
      id: fieldText(reply[i + 2]),
      epoch: fieldText(reply[i + 3]),
      deadline: numberIn("fleet", reply, reply[i + 4])
    })
  }
  return { _tag: "Renewed", windDown }
}

// workers.lua, held.lua: reads for the API and the fleet page -----------------------------

export const workersArgs = (after: string, limit: number): ReadonlyArray<string> => [after, String(limit)]

/** Fields per row of workers.lua: worker, url, ns, headroom, lease, draining, degraded, nackStart, nackCount. */
const WORKER_FIELDS = 9

/** A worker record as workers.lua reads it: all but its incarnation and caller key. */
export const decodeWorkersReply = (reply: unknown): ReadonlyArray<WorkerShown> => {
  if (!isList(reply)) return unexpected("workers", reply)
  return reply.map((row: unknown) => {
    if (!isList(row) || row.length !== WORKER_FIELDS) return unexpected("workers", reply)
    const [worker, url, namespaces, headroom, lease, draining, degraded, nackStart, nackCount] = row.map(fieldText)
    return {
      worker: worker!,
      advertiseUrl: url!,
      namespaces: namespacesIn("workers", reply, namespaces!),
      headroom: numberIn("workers", reply, headroom),
      leaseExpiresAt: numberIn("workers", reply, lease),
      draining: draining === "1",
      degraded: degraded === "1",
      nackWindowStart: numberIn("workers", reply, nackStart),
      nackCount: numberIn("workers", reply, nackCount)
    }
  })
}

/** How many rows of the bucket name each worker asked for, in their order. */
export const decodeHeldReply =
  (workers: number) =>
  (reply: unknown): ReadonlyArray<number> =>
    isList(reply) && reply.length === workers && reply.every((count) => typeof count === "number") ? (reply as ReadonlyArray<number>) : unexpected("held", reply)
