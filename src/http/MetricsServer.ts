// The metrics listener (`metrics.port`, off by default): `GET /metrics` in Prometheus's text
// format, and the fleet page (`/fleet`, `/fleet.js`, `/fleet.json`; FleetPage.ts). Its own
// port, because on the data-plane port every path is an instance request. `/metrics` stays
// open (Prometheus scrapes it); `/fleet.json` takes an operator credential with `credentials`.
import http, { type IncomingMessage, type ServerResponse } from "node:http"
import { Context, Effect, Layer } from "effect"
import { pathOf } from "../Address.js"
import { AppConfig } from "../AppConfig.js"
import { Credentials } from "../auth/Credentials.js"
import { InvalidDeploymentToken, OperatorCredentialRequired, TEXT_PLAIN, type Reply } from "../Errors.js"
import { fleetAccess } from "./FleetAccess.js"
import { readFleet } from "./FleetSnapshot.js"
import { Metrics } from "../observe/Metrics.js"
import { makeRateRing, RATES_KEPT, ratesOf, RATE_SAMPLE_EVERY_MS, sampleForever } from "../observe/Rates.js"
import { Registry } from "../registry/Registry.js"
import { listen } from "../serving/Listen.js"
import { fleetRoutes, type Route } from "./FleetPage.js"
import { isReadMethod } from "./Reply.js"

export interface ListenerAnswer {
  readonly reply: Reply
  /** `Allow`, for the 405. */
  readonly allow?: string
  readonly when: string
}

const plain = (status: number, body: string): Reply => ({ status, contentType: TEXT_PLAIN, body })

/**
 * The listener's own answers, listed beside the data plane's catalogue in docs/errors.md; its two
 * refusals of `/fleet.json` are the registry API's rows, written by the same classes.
 */
export const metricsListenerAnswers = {
  fleetCredentialRefused: {
    reply: new InvalidDeploymentToken().reply,
    when: "With `credentials`: `/fleet.json` without `Authorization: Bearer <key>`, or with a key or token that matches no credential (the catalogue's InvalidDeploymentToken); the page asks for an operator key."
  },
  fleetOperatorRequired: {
    reply: new OperatorCredentialRequired().reply,
    when: "With `credentials`: `/fleet.json` with a worker credential (the catalogue's OperatorCredentialRequired); the page asks for an operator key."
  },
  notFound: { reply: plain(404, "not found"), when: "Any path but `/metrics`, `/fleet`, `/fleet.js` and `/fleet.json`." },
  methodNotAllowed: {
    reply: plain(405, "method not allowed"),
    allow: "GET, HEAD",
    when: "`/metrics`, `/fleet`, `/fleet.js` or `/fleet.json` with a method other than GET or HEAD."
  },
  unavailable: { reply: plain(500, "metrics unavailable"), when: "The metrics could not be rendered." },
  fleetUnavailable: {
    reply: plain(503, "registry unavailable, retry"),
    when: "`/fleet.json` could not read the registry (Redis unreachable or slower than 1 s); the page keeps polling."
  }
} as const satisfies Record<string, ListenerAnswer>

const answer = (res: ServerResponse, { reply, allow }: ListenerAnswer): void => {
  res.writeHead(reply.status, { "content-type": reply.contentType, ...(allow === undefined ? {} : { allow }) }).end(reply.body)
}

export class MetricsServer extends Context.Service<MetricsServer, { readonly port: number | undefined }>()("pinboard/MetricsServer") {
  /** Listens on `metrics.port` (its bound port; none while metrics are off), closed with the layer. */
  static readonly layer: Layer.Layer<MetricsServer, never, AppConfig | Credentials | Metrics | Registry> = Layer.effect(
    MetricsServer,
    Effect.gen(function* () {
      const config = yield* AppConfig
      const metrics = yield* Metrics
      const registry = yield* Registry
      const access = fleetAccess(config.credentials !== undefined, yield* Credentials)
      if (config.metrics.port === undefined) return { port: undefined }
      const host = config.metrics.host ?? config.host
      const ring = makeRateRing(RATES_KEPT)
      yield* Effect.forkScoped(sampleForever(ring, metrics.answered))
      const runPromise = Effect.runPromiseWith(yield* Effect.context<never>())
      const readSnapshot = () => runPromise(readFleet(registry, config.buckets, () => ratesOf(ring, RATE_SAMPLE_EVERY_MS)))
      const admit = (req: IncomingMessage) =>
        runPromise(
          Effect.match(access(req.headers.authorization), {
            onSuccess: (): Route | undefined => undefined,
            onFailure: (error): Route => (_req, res) =>
              answer(res, error._tag === "InvalidDeploymentToken" ? metricsListenerAnswers.fleetCredentialRefused : metricsListenerAnswers.fleetOperatorRequired)
          })
        )
      const serveMetrics: Route = (req, res) =>
        void metrics.render().then(
          ({ body, contentType }) => res.writeHead(200, { "content-type": contentType }).end(req.method === "HEAD" ? undefined : body),
          () => answer(res, metricsListenerAnswers.unavailable)
        )
      const routes = new Map<string, Route>([
        ["/metrics", serveMetrics],
        ...fleetRoutes({ admit, read: readSnapshot, unavailable: (_req, res) => answer(res, metricsListenerAnswers.fleetUnavailable) })
      ])
      const server = http.createServer((req, res) => {
        const route = routes.get(pathOf(req.url ?? "/"))
        if (route === undefined) return answer(res, metricsListenerAnswers.notFound)
        if (!isReadMethod(req.method)) return answer(res, metricsListenerAnswers.methodNotAllowed)
        route(req, res)
      })
      const port = yield* Effect.acquireRelease(Effect.orDie(listen(server, config.metrics.port, host)), () =>
        Effect.callback<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
      )
      yield* Effect.logInfo(`pinboard metrics on http://${host}:${port}/metrics`)
      return { port }
    })
  )
}
