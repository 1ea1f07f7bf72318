// The metrics listener (`metrics.port`, off by default): `GET /metrics` in Prometheus's text
// format, nothing else. Its own port, because on the data-plane port every path is an
// instance request.
import http from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, Layer } from "effect"
import { AppConfig } from "../AppConfig.js"
import { Metrics } from "./Metrics.js"

export const MetricsServerLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const metrics = yield* Metrics
    if (config.metrics.port === undefined) return
    const host = config.metrics.host ?? config.host
    const server = http.createServer((req, res) => {
      const path = (req.url ?? "/").split("?")[0]
      if (path !== "/metrics") {
        res.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("not found")
        return
      }
      if (req.method !== "GET" && req.method !== "HEAD") {
        res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain; charset=utf-8" }).end("method not allowed")
        return
      }
      metrics.render().then(
        ({ body, contentType }) => res.writeHead(200, { "content-type": contentType }).end(req.method === "HEAD" ? undefined : body),
        () => res.writeHead(500, { "content-type": "text/plain; charset=utf-8" }).end("metrics unavailable")
      )
    })
    yield* Effect.acquireRelease(
      Effect.async<void, Error>((resume) => {
        server.once("error", (error) => resume(Effect.fail(error)))
        server.listen(config.metrics.port, host, () => resume(Effect.void))
      }).pipe(Effect.orDie),
      () => Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
    )
    const { port } = server.address() as AddressInfo
    yield* Effect.logInfo(`pinboard metrics on http://${host}:${port}/metrics`)
  })
)
