// Listening as an Effect, for every node:http server here: Pinboard's data plane and metrics
// listeners and the worker library's server.
import type { Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"

/** Binds `server` to host:port (port 0: a free one) and gives the bound port. */
export const listen = (server: Server, port: number, host: string): Effect.Effect<number, Error> =>
  Effect.async<void, Error>((resume) => {
    server.once("error", (error) => resume(Effect.fail(error)))
    server.listen(port, host, () => resume(Effect.void))
  }).pipe(Effect.map(() => (server.address() as AddressInfo).port))
