// The data plane's TLS listener (docs/deploy.md "TLS"): renewed certificate files are taken for
// new connections, on SIGHUP and when they change (serving/Tls.ts).
import type { IncomingMessage, ServerResponse } from "node:http"
import type https from "node:https"
import { Effect, Result, type Scope } from "effect"
import { listenerTlsOptions, loadTlsPair, reloadTlsOnChange, type TlsFiles } from "../serving/Tls.js"
import { createTlsServer, type ServerTimeouts } from "./Listener.js"

/** Watches for renewed files until the scope closes. */
export const tlsServer = (
  timeouts: ServerTimeouts,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  files: TlsFiles,
  http2: boolean,
  run: (effect: Effect.Effect<void>) => unknown
): Effect.Effect<https.Server, never, Scope.Scope> =>
  Effect.gen(function* () {
    // Config.ts has loaded this pair once already: a failure now is a file changed meanwhile.
    const pair = yield* Result.match(loadTlsPair(files), {
      onFailure: (problem) => Effect.die(new Error(`tls.${problem.field}: ${problem.message}`)),
      onSuccess: Effect.succeed
    })
    const server = createTlsServer(timeouts, handler, listenerTlsOptions(pair, http2))
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        reloadTlsOnChange(files, (renewed) => server.setSecureContext(renewed), {
          loaded: (trigger) => run(Effect.logInfo("tls certificate loaded").pipe(Effect.annotateLogs({ trigger, cert: files.cert }))),
          refused: (trigger, problem) =>
            run(
              Effect.logWarning("tls certificate refused, the one in use is kept").pipe(
                Effect.annotateLogs({ trigger, field: `tls.${problem.field}`, reason: problem.message })
              )
            )
        })
      ),
      (stop) => Effect.sync(stop)
    )
    return server
  })
