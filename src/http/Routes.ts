// The data plane's routes (docs/proxy.md): the probes on every listener, `/registry/*` where
// the registry API answers, instance requests and upgrades through the pipeline, each answered
// from its outcome and then observed (observe/Exchange.ts); anything else `404 not found`.
import type { IncomingMessage, ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import { Effect } from "effect"
import { pathOf } from "../Address.js"
import { CLIENT_CLOSED } from "../contract/StatusLine.js"
import { MethodNotAllowed, RouteNotFound } from "../Errors.js"
import type { ExchangeObserver } from "../observe/Exchange.js"
import type { TracingService } from "../observe/Tracing.js"
import type { InstancePipelineService } from "../pipeline/Pipeline.js"
import type { TunnelSet } from "../proxy/Tunnel.js"
import type { Registry } from "../registry/Registry.js"
import { answerOutcome, type Outcome, refusedOutcome, respond } from "./Answer.js"
import { writeBareStatus } from "./BareStatus.js"
import { messageError, type MessageError } from "./Message.js"
import { healthz, readyz } from "./Probes.js"
import { handleRegistry } from "./RegistryApi.js"
import { isReadMethod, writeJson, writeReply } from "./Reply.js"

type DataPlaneRoute = "healthz" | "readyz" | "registry" | "instance"

const routeOf = (url: string): DataPlaneRoute => {
  const path = pathOf(url)
  if (path === "/healthz") return "healthz"
  if (path === "/readyz") return "readyz"
  if (path === "/registry" || path.startsWith("/registry/")) return "registry"
  return "instance"
}

const probe = <A, E>(req: IncomingMessage, answer: Effect.Effect<A, E, Registry>): Effect.Effect<A, E | MethodNotAllowed, Registry> =>
  isReadMethod(req.method) ? answer : new MethodNotAllowed()

export interface RoutesInput {
  readonly pipeline: InstancePipelineService
  readonly tracing: TracingService
  readonly observer: ExchangeObserver
  readonly tunnels: TunnelSet
  readonly shuttingDown: () => boolean
}

export const makeRoutes = ({ pipeline, tracing, observer, tunnels, shuttingDown }: RoutesInput) => {
  // An instance request is answered, then observed once its response is closed: counted,
  // logged and its span ended from the outcome's facts.
  const instance = (req: IncomingMessage, res: ServerResponse, refused: MessageError | undefined) =>
    tracing.request(req, observer, (observing) => {
      const observed = observing.http(req, res)
      const outcome: Effect.Effect<Outcome> = refused === undefined ? pipeline.request(req, res) : refusedOutcome(refused)
      return Effect.flatMap(outcome, (done) =>
        Effect.map(
          answerOutcome(done, (reply) => writeReply(req, res, reply)),
          (answer) => observed(done, answer)
        )
      )
    })

  // An upgrade is observed when its answer is over: the tunnel open, or the bare status written.
  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) =>
    tracing.request(req, observer, (observing) => {
      const observed = observing.upgrade(req)
      const refused = messageError(req)
      const outcome: Effect.Effect<Outcome> = refused === undefined ? pipeline.upgrade(req, socket, head, tunnels) : refusedOutcome(refused)
      return Effect.flatMap(outcome, (done) =>
        Effect.map(
          answerOutcome(done, (reply) => writeBareStatus(socket, reply)),
          (answer) => observed(done, answer, done.upgradeStatus ?? answer?.status ?? CLIENT_CLOSED)
        )
      )
    })

  const registry = (req: IncomingMessage, res: ServerResponse) =>
    respond(req, res, Effect.map(handleRegistry(req), (answer) => writeJson(req, res, answer.status, answer.json)))
  const notFound = (req: IncomingMessage, res: ServerResponse) => respond(req, res, Effect.fail(new RouteNotFound()))
  const probes = (req: IncomingMessage, res: ServerResponse, route: "healthz" | "readyz") =>
    route === "healthz"
      ? respond(req, res, Effect.map(probe(req, healthz), (json) => writeJson(req, res, 200, json)))
      : respond(req, res, Effect.map(probe(req, readyz(shuttingDown)), (json) => writeJson(req, res, 200, json)))

  /**
   * A listener's routes: the probes on every one; `/registry/*` where `registryHere`, instance
   * requests where `instancesHere`; anything else `404 not found`. A malformed request is
   * refused at once, but an instance request's refusal is observed like any of its answers.
   */
  const handlerFor = (registryHere: boolean, instancesHere: boolean) => (req: IncomingMessage, res: ServerResponse) => {
    const route = routeOf(req.url ?? "/")
    const refused = messageError(req)
    if (refused !== undefined && !(instancesHere && route === "instance")) return respond(req, res, Effect.fail(refused))
    switch (route) {
      case "healthz":
      case "readyz":
        return probes(req, res, route)
      case "registry":
        return registryHere ? registry(req, res) : notFound(req, res)
      case "instance":
        return instancesHere ? instance(req, res, refused) : notFound(req, res)
    }
  }
  return { handlerFor, upgrade }
}
