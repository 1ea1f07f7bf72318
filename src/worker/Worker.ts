// A Pinboard worker (docs/worker.md) as an Effect: a node:http server hosting instance definitions,
// a lease kept with Pinboard, idle eviction, wind-down, and a graceful stop when its scope
// closes. Its waits are all on the Clock, so tests run it on TestClock. It runs no Effect
// itself: `startWorker` (StartWorker.ts) is the Promise shell that does.
import http, { type Server } from "node:http"
import { Clock, Duration, Effect, Schedule, type Scope } from "effect"
import { WebSocketServer } from "ws"
import { attestationKey } from "../contract/AttestationKey.js"
import { makeInFlight } from "../serving/Drain.js"
import { listen } from "../serving/Listen.js"
import { writeToStdout } from "../serving/LogLine.js"
import { Activations } from "./Activations.js"
import { makeAttestationVerifier } from "./Attestation.js"
import { keepAttestationKeys } from "./AttestationKeySet.js"
import { makeCalls, type CallerSigningKey } from "./Call.js"
import { presentedCredential, WorkerCredentialError, type CredentialOptions } from "./Credential.js"
import type { InstanceDefinition } from "./Definition.js"
import { handleRequest, handleUpgrade } from "./Handler.js"
import { makeDefaultHeadroom } from "./Headroom.js"
import { keepLease } from "./Lease.js"
import { makeWorkerTracing, type TracesOptions } from "./Tracing.js"
import { httpRegistryClient, type HostnameEnv, type RegistryClient, type WorkerStatus } from "./RegistryClient.js"
import { windDown } from "./WindDown.js"
import { failureLog, withWorkerLog, type WorkerLog } from "./WorkerLog.js"

/**
 * The credential (docs/worker.md "Credentials") is exactly one of `token` (the deployment token),
 * `credential` (a worker key or a JWT, or a function giving the current one) and `credentialFile`
 * (read again on every registry call).
 */
export interface WorkerOptions extends CredentialOptions {
  /** Pinboard's base URL, e.g. `http://pinboard:8080`: `call()` goes there, and registry calls unless `registryUrl` is set. */
  readonly pinboard: string
  /** The registry API's base URL where Pinboard serves it on its own listener (`PINBOARD_REGISTRY_PORT`); default `pinboard`. */
  readonly registryUrl?: string
  /** This worker's id: `[A-Za-z0-9._~-]{1,128}`, unique in the fleet. */
  readonly worker: string
  /** Instance definitions by namespace (`"/threads"`). */
  readonly instances: Readonly<Record<string, InstanceDefinition<any>>>
  /**
   * Hostname-aware mode (docs/proxy.md "Hostname-aware mode"): the hostnames this worker serves, each with the env its
   * placements belong to; every namespace of `instances` is registered for each. Absent: the
   * namespaces are registered plainly (Pinboard not in hostname-aware mode).
   */
  readonly hostnames?: ReadonlyArray<HostnameEnv>
  /**
   * The registration epoch (a decimal string) that sets hostname bindings: a higher one moves a
   * (hostname, namespace) to this worker's env; default `"0"`.
   */
  readonly registrationEpoch?: string
  /** Listening port; default 0 (any free port). */
  readonly port?: number
  /** Listening address; default `127.0.0.1`. */
  readonly host?: string
  /** Where Pinboard reaches this worker; default `http://<host>:<port>`. */
  readonly advertiseUrl?: string
  /** Capacity left, reported on each heartbeat; default: free activation slots, less under event-loop delay. */
  readonly headroom?: () => number
  /** The default headroom's capacity; default 1000 activations. */
  readonly maxActivations?: number
  /** How long before the lease end the worker stops serving; default a fifth of the lease. */
  readonly leaseSafetyMarginMs?: number
  /** How long `stop` waits for requests in progress; default 10 s. */
  readonly shutdownGraceMs?: number
  /** `startWorker` stops the worker and exits on these; default SIGTERM and SIGINT; `[]` for none. */
  readonly stopOnSignals?: ReadonlyArray<NodeJS.Signals>
  /** The registry client; default the HTTP API at `registryUrl` (tests may give their own). */
  readonly registry?: RegistryClient
  /**
   * Where the worker's log lines go, each the JSON object Pinboard would write (time, level,
   * message, worker, ...); default one JSON line each on stdout.
   */
  readonly log?: WorkerLog
  /**
   * Traces (docs/worker.md "Traces"): each request served in a span continued from Pinboard's
   * `traceparent`, exported as OTLP/HTTP JSON. Absent: no spans.
   */
  readonly traces?: TracesOptions
}

/** A running worker, as `makeWorker` gives it: closing its scope stops it. */
export interface RunningWorker {
  readonly worker: string
  readonly url: string
  readonly port: number
  readonly server: Server
  readonly activations: Activations
  /** True while the lease is healthy: new activations are taken. */
  readonly healthy: () => boolean
  /** Completes once the worker has registered with Pinboard (it keeps retrying until then). */
  readonly registered: Effect.Effect<void>
}

const IDLE_SWEEP = Schedule.spaced(Duration.seconds(1))
/** How long a stop waits for requests in progress, unless `shutdownGraceMs` says otherwise. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000

export const makeWorker = (options: WorkerOptions): Effect.Effect<RunningWorker, Error, Scope.Scope> =>
  withWorkerLog(options.log ?? writeToStdout, options.worker)(runWorker(options))

const runWorker = (options: WorkerOptions): Effect.Effect<RunningWorker, Error, Scope.Scope> =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    const clock = yield* Clock.Clock
    const now = () => clock.currentTimeMillisUnsafe()
    const log = failureLog(options.log ?? writeToStdout, options.worker, now)
    const { token } = yield* Effect.try({ try: () => presentedCredential(options), catch: (error) => error as WorkerCredentialError })
    const tokenKey = token === undefined ? undefined : attestationKey(token)
    const definitions = new Map(Object.entries(options.instances) as Array<[string, InstanceDefinition<unknown>]>)
    const host = options.host ?? "127.0.0.1"

    // Made before the stop's finalizer, so that it sends the last spans after the stop.
    const tracing = options.traces === undefined ? undefined : yield* makeWorkerTracing(options.traces, options.worker)
    const server = http.createServer()
    const port = yield* Effect.acquireRelease(listen(server, options.port ?? 0, host), () =>
      Effect.sync(() => server.closeAllConnections()).pipe(
        Effect.andThen(Effect.callback<void>((resume) => void server.close(() => resume(Effect.void)))),
        Effect.andThen(Effect.logInfo("worker stopped"))
      )
    )
    const hostInUrl = host.includes(":") ? `[${host}]` : host
    const advertiseUrl = options.advertiseUrl ?? `http://${hostInUrl}:${port}`
    yield* Effect.logInfo(`worker listening on http://${hostInUrl}:${port}`).pipe(Effect.annotateLogs({ advertise_url: advertiseUrl }))
    const prefix = new URL(advertiseUrl).pathname.replace(/\/+$/, "")
    const registry =
      options.registry ??
      httpRegistryClient({
        pinboard: options.registryUrl ?? options.pinboard,
        token: options.token,
        credential: options.credential,
        credentialFile: options.credentialFile,
        worker: options.worker,
        advertiseUrl,
        namespaces: [...definitions.keys()],
        ...(options.hostnames === undefined ? {} : { hostnames: options.hostnames }),
        ...(options.registrationEpoch === undefined ? {} : { registrationEpoch: options.registrationEpoch })
      })
    const keySet = yield* keepAttestationKeys(registry.keys ?? (() => Promise.resolve([])), token !== undefined, now, log)
    const verifyAttestation = makeAttestationVerifier(keySet, tokenKey, options.worker)
    // The lease is made below, and a call is only made once an activation is: by then it is there.
    const callerKey = (): CallerSigningKey => {
      const key = lease.callerKey() ?? (tokenKey === undefined ? undefined : { secret: tokenKey, kid: undefined })
      if (key === undefined) throw new Error("no key to sign Pinboard-Caller with: the worker holds no registration")
      return key
    }
    const calls = makeCalls(options.pinboard, callerKey, now)
    yield* Effect.addFinalizer(() => Effect.promise(() => calls.close()))
    const { callAs } = calls

    const activations = new Activations(definitions, { worker: options.worker, now, release: registry.release, callAs, log })

    const headroom = options.headroom ?? (yield* makeDefaultHeadroom(options.maxActivations ?? 1000, () => activations.size))
    let draining = false
    const status = (): WorkerStatus => ({ headroom: Math.max(0, headroom()), draining })

    const lease = yield* keepLease(
      // The first registration waits for the key set: Pinboard forwards once it is through.
      { ...registry, register: (status) => keySet.known().then(() => registry.register(status)) },
      {
        drop: (reason, which) => Effect.promise(() => (which === undefined ? activations.dropAll(reason) : activations.dropWhere(which, reason))),
        // Beside the heartbeats, not in their way; a stop ends the wind-downs still running.
        windDown: (entries) => Effect.asVoid(Effect.forkIn(windDown(activations, entries, log), scope)),
        status
      },
      options.leaseSafetyMarginMs === undefined ? {} : { safetyMarginMs: options.leaseSafetyMarginMs }
    )
    yield* Effect.forkScoped(Effect.repeat(Effect.promise(() => activations.sweepIdle()), IDLE_SWEEP))

    const webSockets = new WebSocketServer({ noServer: true })
    const deps = { worker: options.worker, verifyAttestation, prefix, now, definitions, activations, leaseHealthy: lease.healthyFor, callAs, webSockets, log }
    const inFlight = makeInFlight()
    server.on("request", (req, res) => {
      inFlight.track(res)
      void (tracing === undefined ? handleRequest(deps, req, res) : tracing.request(req, res, (traceparent) => handleRequest(deps, req, res, traceparent)))
    })
    server.on("upgrade", (req, socket, head) =>
      void (tracing === undefined ? handleUpgrade(deps, req, socket, head) : tracing.upgrade(req, (traceparent) => handleUpgrade(deps, req, socket, head, traceparent)))
    )

    const grace = Duration.millis(options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS)
    const stopping = Effect.gen(function* () {
      yield* Effect.logInfo("worker draining").pipe(Effect.annotateLogs({ grace_ms: Duration.toMillis(grace) }))
      draining = true
      // Tell Pinboard at once, so no new placement lands here during the grace period.
      const incarnation = lease.incarnation()
      if (incarnation !== undefined) yield* Effect.ignore(Effect.tryPromise(() => registry.heartbeat(incarnation, status())))
      yield* inFlight.drain([server], grace)
      yield* Effect.promise(() => activations.dropAll("shutdown"))
      yield* lease.deregister
    })
    yield* Effect.addFinalizer(() => stopping)

    return {
      worker: options.worker,
      url: advertiseUrl,
      port,
      server,
      activations,
      healthy: lease.healthy,
      registered: lease.registered
    }
  })
