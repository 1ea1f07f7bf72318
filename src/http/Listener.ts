// What Pinboard's HTTP listeners share (docs/proxy.md "Limits", "Shutdown"): connection
// timeouts that fit a balancer in front, and the drain delay's wait.
import http, { type IncomingMessage, type ServerResponse } from "node:http"
import https from "node:https"
import type { TlsOptions } from "node:tls"
import { Deferred, Duration, Effect, Exit, type Scope } from "effect"

export interface ServerTimeouts {
  readonly keepAliveTimeoutMs: number
  readonly headersTimeoutMs: number
}

/**
 * `server.*`'s timeouts. An idle keep-alive connection is closed after `keepAliveTimeoutMs`
 * (Node's 5 s is below every balancer's idle timeout, which then sends a request on a
 * connection being closed); no total request timeout (Node's 300 s would cut a slow upload,
 * which the body-idle limit bounds). `requireHostHeader`: a missing Host must reach Pinboard's
 * own check (docs/proxy.md "What every client gets").
 */
const serverOptions = (timeouts: ServerTimeouts): http.ServerOptions => ({
  requireHostHeader: false,
  headersTimeout: timeouts.headersTimeoutMs,
  requestTimeout: 0,
  // How often the headers timeout is checked: Node's 30 s would let a short one run 30 s over.
  connectionsCheckingInterval: Math.min(30_000, timeouts.headersTimeoutMs)
})

const withKeepAlive = <S extends http.Server>(server: S, timeouts: ServerTimeouts): S => {
  server.keepAliveTimeout = timeouts.keepAliveTimeoutMs
  return server
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void

/** A node:http server with `server.*`'s timeouts. */
export const createServer = (timeouts: ServerTimeouts, handler: Handler): http.Server =>
  withKeepAlive(http.createServer(serverOptions(timeouts), handler), timeouts)

/** The same over TLS (docs/deploy.md "TLS"). */
export const createTlsServer = (timeouts: ServerTimeouts, handler: Handler, tls: TlsOptions): https.Server =>
  withKeepAlive(https.createServer({ ...serverOptions(timeouts), ...tls }, handler), timeouts)

const SIGNALS = ["SIGTERM", "SIGINT"] as const

/**
 * The next SIGTERM or SIGINT (the second signal of a stop), listened for from the moment this
 * runs until its scope closes; the effect it gives waits for it.
 */
export const nextStopSignal: Effect.Effect<Effect.Effect<void>, never, Scope.Scope> = Effect.gen(function* () {
  const signalled = yield* Deferred.make<void>()
  const cut = () => void Deferred.doneUnsafe(signalled, Exit.void)
  yield* Effect.acquireRelease(
    Effect.sync(() => SIGNALS.forEach((name) => process.once(name, cut))),
    () => Effect.sync(() => SIGNALS.forEach((name) => process.off(name, cut)))
  )
  return Deferred.await(signalled)
})

/** Waits `delayMs`, or less if `cut` comes first. */
export const delayUnless = (delayMs: number, cut: Effect.Effect<void>): Effect.Effect<void> =>
  // Stops run in finalizers, uninterruptibly: the race must be interruptible for its loser to end.
  Effect.interruptible(Effect.raceFirst(Effect.sleep(Duration.millis(delayMs)), cut))
