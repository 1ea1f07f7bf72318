// Listening as an Effect, for both of Pinboard's listeners (the data plane and the metrics).
import type { Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"

/** Binds `server` to host:port (port 0: a free one) and gives the bound port; a failure to bind is a defect. */
export const listen = (server: Server, port: number, host: string): Effect.Effect<number> =>
  Effect.async<void, Error>((resume) => {
    server.once("error", (error) => resume(Effect.fail(error)))
    server.listen(port, host, () => resume(Effect.void))
  }).pipe(
    Effect.orDie,
    Effect.map(() => (server.address() as AddressInfo).port)
  )
