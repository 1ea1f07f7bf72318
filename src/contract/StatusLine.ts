// An HTTP/1.1 status line, as both sides write it on a raw socket: Pinboard's bare answers to
// upgrades and CONNECT, the worker library's answers to upgrades it refuses.
import { STATUS_CODES } from "node:http"

export const statusLine = (status: number): string => `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}`
