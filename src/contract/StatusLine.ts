// An HTTP/1.1 status line, as both sides write it on a raw socket: Pinboard's bare answers to
// upgrades and CONNECT, the worker library's answers to upgrades it refuses.
import { STATUS_CODES } from "node:http"

/** The status recorded when the client left before an answer was sent: 499, nginx's "client closed request". */
export const CLIENT_CLOSED = 499

export const statusLine = (status: number): string => `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}`
