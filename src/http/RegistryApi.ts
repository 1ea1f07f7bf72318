// The registry HTTP API (docs/registry-api.md): who calls (auth/Credentials.ts), routes, what
// the caller's role and grant allow (checked before the registry is touched), bodies, answers.
import { randomBytes } from "node:crypto"
import type { IncomingMessage } from "node:http"
import { Effect, type Schema } from "effect"
import { AppConfig } from "../AppConfig.js"
import type { PinboardConfig } from "../Config.js"
import { MethodNotAllowed, PlacementHeldByAnotherWorker, RouteNotFound } from "../Errors.js"
import { Auth } from "../auth/Auth.js"
import { Credentials } from "../auth/Credentials.js"
import type { CasOutcome, NamespaceRegistration, PlacementKey, PlacementView, WorkerView } from "../registry/Domain.js"
import { Registry, type RegistryService } from "../registry/Registry.js"
import { readJson, REGISTRY_BODY_LIMIT } from "./Body.js"
import { isReadMethod } from "./Reply.js"
import { mayActAs, mayDeregister, mayRegister, operatorOnly, ownersFor } from "./RegistryRoles.js"
import {
  Cursor,
  decodeBody,
  decodeParam,
  EnvName,
  HeartbeatBody,
  HostnameRegisterBody,
  Incarnation,
  InstanceId,
  Namespace,
  PageLimit,
  RegisterBody,
  ReleaseBody,
  TagBody,
  WorkerId
} from "./RegistryBodies.js"

export interface ApiAnswer {
  readonly status: number
  readonly json?: unknown
}

const ok = (json: unknown): ApiAnswer => ({ status: 200, json })
const casAnswer = (field: "released" | "tagged") => (outcome: CasOutcome): Effect.Effect<ApiAnswer, PlacementHeldByAnotherWorker> => {
  switch (outcome._tag) {
    case "Done":
      return Effect.succeed(ok({ [field]: true }))
    case "Conflict":
      return Effect.succeed({ status: 409, json: { [field]: false, epoch: outcome.current } })
    case "HeldByAnotherWorker":
      return new PlacementHeldByAnotherWorker()
  }
}

const body = <A>(req: IncomingMessage, schema: Schema.Decoder<A>) =>
  Effect.flatMap(readJson(req, REGISTRY_BODY_LIMIT), (input) => Effect.fromResult(decodeBody(schema, input)))

const param = <A>(schema: Schema.Codec<A, string>, name: string, value: string | null) => Effect.fromResult(decodeParam(schema, name, value))

/** Each registration once; a hostname lowercased, as Pinboard reads the Host header. */
const registrationsOf = (namespaces: ReadonlyArray<string | NamespaceRegistration>): ReadonlyArray<NamespaceRegistration> => {
  const unique = new Map<string, NamespaceRegistration>()
  for (const entry of namespaces) {
    const registration =
      typeof entry === "string" ? { namespace: entry, hostname: "", env: "" } : { ...entry, hostname: entry.hostname.toLowerCase() }
    unique.set(`${registration.hostname}\n${registration.namespace}\n${registration.env}`, registration)
  }
  return [...unique.values()]
}

const workerJson = (config: PinboardConfig) => (view: WorkerView) => ({
  worker: view.worker,
  advertiseUrl: view.advertiseUrl,
  namespaces: config.hostnameAware ? view.namespaces : view.namespaces.map((n) => n.namespace),
  headroom: view.headroom,
  leaseExpiresAt: view.leaseExpiresAt,
  draining: view.draining,
  degraded: view.degraded,
  nacks: view.nacks
})

/** An answer of `GET /registry/workers` stays within this many bytes of JSON. */
const WORKERS_ANSWER_BYTES = 1024 * 1024
/** Workers read from the registry per call while an answer is put together. */
const WORKERS_READ = 256
/** `{"workers":[],"next":""}` around the records, with room for the longest cursor (a 128-character id). */
const ANSWER_FRAME_BYTES = '{"workers":[],"next":""}'.length + 128

/**
 * One page of `GET /registry/workers`: the workers after the cursor in worker id order, at most
 * `limit` of them and at most WORKERS_ANSWER_BYTES of JSON in all (cut after the last whole record
 * that fits; always at least one, and a record is at most a 64 KiB register body's worth), with
 * `next` when more follow.
 *
 * The cursor is the id of the last worker answered, as is. Worker ids are made of characters
 * that are unreserved in URLs ([A-Za-z0-9._~-]), so it goes into a query without escaping; being
 * a position in id order rather than an offset or a server-side handle, it needs no state, and
 * it stays good whatever joins or leaves the fleet between two reads (the worker it names
 * included). Encoding it (base64url) would hide it without protecting anything: the deployment
 * token already guards the API. Clients are told it is opaque, so another form can come later,
 * told apart by a character that no worker id has.
 */
const workersPage = (registry: RegistryService, config: PinboardConfig, cursor: string, limit: number) =>
  Effect.gen(function* () {
    const workers: Array<ReturnType<ReturnType<typeof workerJson>>> = []
    let bytes = ANSWER_FRAME_BYTES
    let after = cursor
    for (;;) {
      // One more than still wanted, so that `next` is given only when a worker follows.
      const ask = Math.min(WORKERS_READ, limit - workers.length + 1)
      const page = yield* registry.workersPage(after, ask)
      for (const view of page) {
        const json = workerJson(config)(view)
        const size = Buffer.byteLength(JSON.stringify(json), "utf8") + (workers.length === 0 ? 0 : 1)
        if (workers.length === limit || (workers.length > 0 && bytes + size > WORKERS_ANSWER_BYTES)) {
          return { workers, next: workers.at(-1)!.worker }
        }
        workers.push(json)
        bytes += size
      }
      if (page.length < ask) return { workers }
      after = page.at(-1)!.worker
    }
  })

const placementJson = (view: PlacementView) => ({
  namespace: view.namespace,
  id: view.id,
  env: view.env,
  worker: view.worker,
  advertiseUrl: view.advertiseUrl,
  epoch: view.epoch,
  tag: view.tag,
  placedAt: view.placedAt,
  windDownAt: view.windDownAt === 0 ? null : view.windDownAt,
  live: view.live
})

const placementKey = (key: Omit<PlacementKey, "env"> & { readonly env?: string }): PlacementKey => ({ env: key.env ?? "", namespace: key.namespace, id: key.id })

/** `/registry...` requests; the path is already known to start with `/registry`. */
export const handleRegistry = (req: IncomingMessage) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const registry = yield* Registry
    const auth = yield* Auth
    const caller = yield* (yield* Credentials).identify(req.headers.authorization)
    // Split as sent: `new URL` would remove `.` and `..` segments, which are valid worker ids and ids.
    const target = req.url ?? "/"
    const queryAt = target.indexOf("?")
    const path = (queryAt === -1 ? target : target.slice(0, queryAt)).split("/").slice(2)
    const query = new URLSearchParams(queryAt === -1 ? "" : target.slice(queryAt + 1))
    const method = req.method ?? "GET"
    const only = (allowed: "GET" | "POST" | "DELETE") =>
      method === allowed || (allowed === "GET" && isReadMethod(method)) ? Effect.void : new MethodNotAllowed()

    switch (path[0]) {
      case "workers": {
        if (path.length === 1) {
          if (isReadMethod(method)) {
            yield* operatorOnly(caller)
            const limit = query.has("limit") ? Number(yield* param(PageLimit, "limit", query.get("limit"))) : Infinity
            const cursor = query.has("cursor") ? yield* param(Cursor, "cursor", query.get("cursor")) : ""
            return ok(yield* workersPage(registry, config, cursor, limit))
          }
          yield* only("POST")
          const input = config.hostnameAware ? yield* body(req, HostnameRegisterBody) : yield* body(req, RegisterBody)
          const namespaces = registrationsOf(input.namespaces)
          yield* mayActAs(caller, input.worker)
          yield* mayRegister(caller, namespaces)
          // With attestation keys each incarnation signs its caller tokens with its own key.
          const callerKey = auth.callerKeys._tag === "PerIncarnation" ? randomBytes(32).toString("base64url") : undefined
          const registered = yield* registry.register({
            worker: input.worker,
            advertiseUrl: input.advertiseUrl,
            namespaces,
            headroom: input.headroom,
            draining: input.draining ?? false,
            callerKey,
            ...(input.epoch === undefined ? {} : { epoch: input.epoch })
          })
          return ok(callerKey === undefined ? registered : { ...registered, callerKey })
        }
        const worker = yield* param(WorkerId, "worker", decodeURIComponentSafe(path[1]!))
        if (path.length === 2) {
          yield* only("DELETE")
          yield* mayDeregister(caller, worker)
          const incarnation = yield* param(Incarnation, "incarnation", query.get("incarnation"))
          yield* registry.deregister(worker, incarnation)
          return { status: 204 }
        }
        if (path.length === 3 && path[2] === "heartbeat") {
          yield* only("POST")
          yield* mayActAs(caller, worker)
          const input = yield* body(req, HeartbeatBody)
          return ok(
            yield* registry.heartbeat(worker, {
              incarnation: input.incarnation,
              headroom: input.headroom,
              draining: input.draining ?? false,
              degraded: input.degraded ?? false
            })
          )
        }
        return yield* new RouteNotFound()
      }
      case "release":
      case "tag": {
        if (path.length !== 1) return yield* new RouteNotFound()
        yield* only("POST")
        if (path[0] === "release") {
          const input = yield* body(req, ReleaseBody)
          const key = placementKey(input)
          const owners = yield* ownersFor(caller, key)
          return yield* casAnswer("released")(yield* registry.release(key, input.epoch, owners))
        }
        const input = yield* body(req, TagBody)
        const key = placementKey(input)
        const owners = yield* ownersFor(caller, key)
        return yield* casAnswer("tagged")(yield* registry.tag(key, input.epoch, input.tag, owners))
      }
      case "keys": {
        if (path.length !== 1) return yield* new RouteNotFound()
        yield* only("GET")
        return ok({ keys: auth.publishedKeys() })
      }
      case "placements": {
        if (path.length !== 3) return yield* new RouteNotFound()
        yield* only("GET")
        yield* operatorOnly(caller)
        const namespace = yield* param(Namespace, "namespace", `/${decodeURIComponentSafe(path[1]!)}`)
        const id = yield* param(InstanceId, "id", decodeURIComponentSafe(path[2]!))
        const env = yield* param(EnvName, "env", query.get("env") ?? "")
        return ok(placementJson(yield* registry.placement({ env, namespace, id })))
      }
      default:
        return yield* new RouteNotFound()
    }
  })

/** A path segment as the client meant it; a malformed escape is left as is (and fails the format check). */
const decodeURIComponentSafe = (segment: string): string => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}
