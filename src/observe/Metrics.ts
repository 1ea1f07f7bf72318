// Prometheus metrics (docs/operations.md): what the proxy does, counted where it happens and
// served on a listener of their own (`metrics.port`), never on the data-plane port where
// every path is an instance request. prom-client keeps the values and writes the exposition
// format. Off by default: the service is then a set of no-ops, and the hot path pays nothing.
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../AppConfig.js"
import { Counter, Gauge, Histogram, Registry as PromRegistry, collectDefaultMetrics } from "prom-client"
import { countAnswer, emptyTotals, type AnsweredTotals } from "./Rates.js"
import { meteredResolve, type MeterResolve } from "./ResolveMetrics.js"

/** How a resolve ended, as the resolve histogram labels it. */
export type ResolveOutcomeLabel =
  | "forwarded"
  | "placed"
  | "re_placed"
  | "unknown_namespace"
  | "cold_start"
  | "no_live_backends"
  | "unavailable"
  | "clock_offset"
  // hostname-aware mode
  | "takeover"
  | "held_by_another_hostname"
  | "displaced"

/** Live values read when scraped, from the parts that keep them. */
export interface Gauges {
  /** Forwards awaiting headers, per worker (docs/proxy.md's inflight cap). */
  readonly inflight: () => Iterable<readonly [string, number]>
  readonly tunnels: () => number
}

/** Times a Redis round trip; `failedOf` says whether its answer counts as failed. */
export type TimeRedisCall = <A>(script: string, run: () => Promise<A>, failedOf: (answer: A) => boolean) => Promise<A>

export const untimed: TimeRedisCall = (_script, run) => run()

export interface MetricsService {
  /** Requests answered and 5xx among them, since start: what the fleet page's rates sample (Rates.ts). */
  readonly answered: Readonly<AnsweredTotals>
  /** An instance request answered, its namespace as the pipeline read it (if it got that far). */
  readonly request: (namespace: string | undefined, status: number, seconds: number) => void
  /** An answer Pinboard wrote itself, by its catalogue error tag. */
  readonly error: (tag: string) => void
  readonly resolve: (namespace: string, outcome: ResolveOutcomeLabel, seconds: number) => void
  /** The registry's `resolve`, timed and counted by outcome: `resolve` itself when metrics are off. */
  readonly meterResolve: MeterResolve
  /** A worker refused an activation in-band (its nack is counted too). */
  readonly refusal: () => void
  /** One Redis script call (a fan-out counts once), timed and counted: the call itself when metrics are off. */
  readonly timeRedisCall: TimeRedisCall
  /** One failed Redis call, by the kind of its reason (registry/RedisFailure.ts). */
  readonly registryFailure: (kind: string) => void
  readonly watch: (gauges: Partial<Gauges>) => void
  /** This process's wall clock minus the registry's, at the last sample (docs/deploy.md "Clocks"). */
  readonly clockOffset: (offsetMs: number) => void
  /** The offset went past `registry.maxClockOffsetMs`: registry writes stopped. */
  readonly clockOutOfBound: () => void
  /** The exposition text and its content type. */
  readonly render: () => Promise<{ readonly body: string; readonly contentType: string }>
}

export class Metrics extends Context.Service<Metrics, MetricsService>()("pinboard/Metrics") {
  /** On when `metrics.port` is set; off, every call is a no-op. */
  static readonly layer: Layer.Layer<Metrics, never, AppConfig> = Layer.effect(
    Metrics,
    Effect.map(AppConfig, (config) => (config.metrics.port === undefined ? metricsOff : makeMetrics()))
  )

  static readonly layerTest = (metrics: MetricsService): Layer.Layer<Metrics> => Layer.succeed(Metrics, metrics)
}

export const metricsOff: MetricsService = {
  answered: emptyTotals(),
  request: () => undefined,
  error: () => undefined,
  resolve: () => undefined,
  meterResolve: (resolve) => resolve,
  refusal: () => undefined,
  timeRedisCall: untimed,
  registryFailure: () => undefined,
  watch: () => undefined,
  clockOffset: () => undefined,
  clockOutOfBound: () => undefined,
  render: async () => ({ body: "", contentType: "text/plain" })
}

const statusClass = (status: number): string => `${Math.floor(status / 100)}xx`

/** Seconds, for one registry round trip: 0.1 ms to 1 s (a call's limit). */
const ROUND_TRIP_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]

/** Namespace labels are the registered namespaces only: any other path would grow the series without end. */
const OTHER_NAMESPACE = "other"

export const makeMetrics = (): MetricsService => {
  const registry = new PromRegistry()
  collectDefaultMetrics({ register: registry, prefix: "pinboard_" })
  const known = new Set<string>()
  const answered = emptyTotals()
  const gauges: { inflight: Gauges["inflight"]; tunnels: Gauges["tunnels"] } = { inflight: () => [], tunnels: () => 0 }

  const requests = new Counter({
    name: "pinboard_requests_total",
    help: "Instance requests (WebSocket upgrades included) answered, by namespace and status class.",
    labelNames: ["namespace", "class"] as const,
    registers: [registry]
  })
  const requestSeconds = new Histogram({
    name: "pinboard_request_duration_seconds",
    help: "From the request's arrival to the end of its answer (to the 101 for upgrades), by status class.",
    labelNames: ["class"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry]
  })
  const errors = new Counter({
    name: "pinboard_errors_total",
    help: "Answers Pinboard wrote itself, by catalogue error (docs/errors.md).",
    labelNames: ["error"] as const,
    registers: [registry]
  })
  const resolves = new Histogram({
    name: "pinboard_resolve_duration_seconds",
    help: "Registry resolves, by outcome: forwarded to a live owner, placed anew, re-placed after a refusal, or refused.",
    labelNames: ["outcome"] as const,
    buckets: ROUND_TRIP_BUCKETS,
    registers: [registry]
  })
  const placements = new Counter({
    name: "pinboard_placements_total",
    help: "New placements, by namespace; kind re_placed: after the worker refused the activation (503 with Pinned-Refusal).",
    labelNames: ["namespace", "kind"] as const,
    registers: [registry]
  })
  const refusals = new Counter({
    name: "pinboard_refusals_total",
    help: "In-band refusals (Pinned-Refusal) from workers; each is also a nack against the worker.",
    registers: [registry]
  })
  const registryFailures = new Counter({
    name: "pinboard_registry_failures_total",
    help: "Failed Redis calls, by reason: refused, timeout, closed, auth, permission, tls, dns, cluster, sentinel or other.",
    labelNames: ["reason"] as const,
    registers: [registry]
  })
  const redisSeconds = new Histogram({
    name: "pinboard_redis_call_duration_seconds",
    help: "Round trips of registry script calls to Redis, by script (a fan-out over every bucket counts once).",
    labelNames: ["script"] as const,
    buckets: ROUND_TRIP_BUCKETS,
    registers: [registry]
  })
  const redisErrors = new Counter({
    name: "pinboard_redis_errors_total",
    help: "Registry script calls that failed (Redis unreachable, slow or a shard down), by script.",
    labelNames: ["script"] as const,
    registers: [registry]
  })
  const clockOffset = new Gauge({
    name: "pinboard_registry_clock_offset_seconds",
    help: "This process's wall clock minus the registry's (Redis TIME), at the last sample.",
    registers: [registry]
  })
  const clockOutOfBound = new Counter({
    name: "pinboard_registry_clock_out_of_bound_total",
    help: "Times the clock offset went past registry.maxClockOffsetMs (registry writes stopped until back in bound).",
    registers: [registry]
  })
  new Gauge({
    name: "pinboard_worker_inflight",
    help: "Forwards awaiting the worker's headers, per worker (the inflight cap counts these).",
    labelNames: ["worker"] as const,
    registers: [registry],
    collect() {
      this.reset()
      for (const [worker, count] of gauges.inflight()) this.set({ worker }, count)
    }
  })
  new Gauge({
    name: "pinboard_open_tunnels",
    help: "WebSocket tunnels open now.",
    registers: [registry],
    collect() {
      this.set(gauges.tunnels())
    }
  })

  const labelOf = (namespace: string | undefined) =>
    namespace !== undefined && known.has(namespace) ? namespace : OTHER_NAMESPACE

  const resolve: MetricsService["resolve"] = (namespace, outcome, seconds) => {
    resolves.observe({ outcome }, seconds)
    if (outcome === "forwarded" || outcome === "placed" || outcome === "re_placed") known.add(namespace)
    if (outcome === "placed" || outcome === "re_placed") placements.inc({ namespace, kind: outcome })
  }
  return {
    answered,
    request: (namespace, status, seconds) => {
      countAnswer(answered, status)
      const cls = statusClass(status)
      requests.inc({ namespace: labelOf(namespace), class: cls })
      requestSeconds.observe({ class: cls }, seconds)
    },
    error: (tag) => errors.inc({ error: tag }),
    resolve,
    meterResolve: (registryResolve) => meteredResolve(registryResolve, { resolve }),
    refusal: () => refusals.inc(),
    timeRedisCall: (script, run, failedOf) => {
      const started = performance.now()
      const observe = (failed: boolean) => {
        redisSeconds.observe({ script }, (performance.now() - started) / 1000)
        if (failed) redisErrors.inc({ script })
      }
      return run().then(
        (answer) => {
          observe(failedOf(answer))
          return answer
        },
        (error: unknown) => {
          observe(true)
          throw error
        }
      )
    },
    registryFailure: (kind) => registryFailures.inc({ reason: kind }),
    watch: (given) => {
      if (given.inflight !== undefined) gauges.inflight = given.inflight
      if (given.tunnels !== undefined) gauges.tunnels = given.tunnels
    },
    clockOffset: (offsetMs) => clockOffset.set(offsetMs / 1000),
    clockOutOfBound: () => clockOutOfBound.inc(),
    render: async () => ({ body: await registry.metrics(), contentType: registry.contentType })
  }
}
