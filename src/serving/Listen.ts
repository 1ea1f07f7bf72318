// Listening as an Effect, for every node:http server here: Pinboard's data plane and metrics
// listeners and the worker library's server.
import type { Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"

/** A port that cannot be bound: main prints its message and exits 1 (docs/config.md "Command line"). */
export class ListenFailed extends Error {
  override readonly name = "ListenFailed"
}

const REASONS: Record<string, string> = {
  EADDRINUSE: "the port is in use",
  EACCES: "permission denied",
  EADDRNOTAVAIL: "no such address on this machine"
}

/** Binds `server` to host:port (port 0: a free one) and gives the bound port. */
export const listen = (server: Server, port: number, host: string): Effect.Effect<number, ListenFailed> =>
  Effect.callback<void, ListenFailed>((resume) => {
    server.once("error", (error: NodeJS.ErrnoException) => {
      const reason = (error.code !== undefined ? REASONS[error.code] : undefined) ?? error.message
      resume(Effect.fail(new ListenFailed(`cannot listen on ${host}:${port}: ${reason}`, { cause: error })))
    })
    server.listen(port, host, () => resume(Effect.void))
  }).pipe(Effect.map(() => (server.address() as AddressInfo).port))
