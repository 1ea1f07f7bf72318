// The two registry answers `pinboard inspect` reads (docs/registry-api.md):
// `GET /registry/workers` and `GET /registry/placements/{namespace}/{id}`, as Schemas, so a
// Pinboard that answers something else is reported rather than misread.
import { Schema } from "effect"

/** A string outside hostname-aware mode, an object within it. */
export const NamespaceEntry = Schema.Union([
  Schema.String,
  Schema.Struct({ namespace: Schema.String, hostname: Schema.String, env: Schema.String })
])
export type NamespaceEntry = typeof NamespaceEntry.Type

export const ListedWorker = Schema.Struct({
  worker: Schema.String,
  advertiseUrl: Schema.String,
  namespaces: Schema.Array(NamespaceEntry),
  headroom: Schema.Number,
  leaseExpiresAt: Schema.Number,
  draining: Schema.Boolean,
  degraded: Schema.Boolean,
  nacks: Schema.Number
})
export type ListedWorker = typeof ListedWorker.Type

/** One page; `next`, when present, is the cursor of the page that follows. */
export const WorkersAnswer = Schema.Struct({
  workers: Schema.Array(ListedWorker),
  next: Schema.optionalKey(Schema.String)
})

export const PlacementAnswer = Schema.Struct({
  namespace: Schema.String,
  id: Schema.String,
  env: Schema.String,
  worker: Schema.String,
  advertiseUrl: Schema.NullOr(Schema.String),
  epoch: Schema.String,
  tag: Schema.String,
  placedAt: Schema.Number,
  windDownAt: Schema.NullOr(Schema.Number),
  live: Schema.Boolean
})
export type PlacementAnswer = typeof PlacementAnswer.Type

/**
 * Whether a listed worker serves `namespace` in `env` (a plain string entry is env ""), and when
 * `hostname` is given, for that hostname (hostname-aware mode's candidates, docs/proxy.md "Hostname-aware mode").
 */
export const servesNamespace = (worker: ListedWorker, env: string, namespace: string, hostname?: string): boolean =>
  worker.namespaces.some((entry) =>
    typeof entry === "string"
      ? hostname === undefined && env === "" && entry === namespace
      : entry.env === env && entry.namespace === namespace && (hostname === undefined || entry.hostname === hostname)
  )
