// The affinity value that rendezvous placement hashes (docs/config.md `affinity.key`, docs/protocol.md "Resolution").
import type { IncomingMessage } from "node:http"
import type { AffinityKey } from "../Config.js"
import { cookieValue } from "../contract/Cookie.js"

/** The configured header or cookie, falling back to the client's address (`ip`) when the request has none. */
export const affinityOf = (req: IncomingMessage, key: AffinityKey, ip: string): string => {
  switch (key._tag) {
    case "ip":
      return ip
    case "header": {
      const value = req.headers[key.name]
      return (Array.isArray(value) ? value[0] : value) ?? ip
    }
    case "cookie":
      return cookieValue(req.headers.cookie, key.name) ?? ip
  }
}
