// An instance request in the seed's check order: id, attestation, depth, data-plane rule,
// hostname binding, caller scope, resolve, inflight cap, forward. This stage has the id,
// resolve and forward steps; the others arrive with the data-plane, auth and
// hostname-aware work.
import type { IncomingMessage, ServerResponse } from "node:http"
import { Effect } from "effect"
import { parseAddress } from "../Address.js"
import { AppConfig } from "../AppConfig.js"
import { Registry } from "../registry/Registry.js"
import { forward } from "../proxy/Forward.js"
import { affinityOf } from "./Affinity.js"

export const handleInstanceRequest = (req: IncomingMessage, res: ServerResponse) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const registry = yield* Registry
    const address = yield* parseAddress(req.url ?? "/")
    const placement = yield* registry.resolve({
      env: "",
      namespace: address.namespace,
      id: address.id,
      hostname: "",
      caller: undefined,
      affinity: affinityOf(req, config.affinity.key),
      excluded: []
    })
    yield* forward(req, res, address, placement)
  })
