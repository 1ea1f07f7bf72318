// The fleet page on the metrics listener (docs/operations.md "The fleet page"): `/fleet` (a
// plain HTML file), `/fleet.js` (its script, served as written: no build step) and
// `/fleet.json` (what the script polls; with `credentials`, for an operator credential alone:
// FleetAccess.ts). The files are read once, at start-up.
import { readFileSync } from "node:fs"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { FleetSnapshot } from "./FleetSnapshot.js"

const pageFile = (name: string): string => readFileSync(new URL(`./fleet/${name}`, import.meta.url), "utf8")

/** What a route does with a GET or HEAD (the listener answers 404 and 405 before). */
export type Route = (req: IncomingMessage, res: ServerResponse) => void

/** Nothing from elsewhere: the page works on a closed network and runs only its own script. */
const PAGE_POLICY =
  "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const sendText = (req: IncomingMessage, res: ServerResponse, status: number, headers: Record<string, string>, body: string): void => {
  res.writeHead(status, { ...headers, "content-length": String(Buffer.byteLength(body)), "x-content-type-options": "nosniff" })
  res.end(req.method === "HEAD" ? undefined : body)
}

const fixedFile = (contentType: string, body: string, extra: Record<string, string> = {}): Route => (req, res) =>
  sendText(req, res, 200, { "content-type": contentType, "cache-control": "no-cache", ...extra }, body)

/**
 * Reads shared by every poll that arrives while one is under way: several open pages cost the
 * registry one read at a time.
 */
export const sharedRead = <A>(read: () => Promise<A>): (() => Promise<A>) => {
  let pending: Promise<A> | undefined
  return () => {
    if (pending === undefined) pending = read().finally(() => (pending = undefined))
    return pending
  }
}

export interface FleetSource {
  /** Undefined when the request may read the fleet; else the route that answers its refusal. */
  readonly admit: (req: IncomingMessage) => Promise<Route | undefined>
  readonly read: () => Promise<FleetSnapshot>
  /** Answers a failed registry read (or a failed check of the caller: never a crash of the listener). */
  readonly unavailable: Route
}

/** The three routes. */
export const fleetRoutes = ({ admit, read, unavailable }: FleetSource): ReadonlyMap<string, Route> => {
  const shared = sharedRead(read)
  const serveSnapshot: Route = (req, res) =>
    void shared().then(
      (snapshot) => sendText(req, res, 200, { "content-type": "application/json", "cache-control": "no-store" }, JSON.stringify(snapshot)),
      () => unavailable(req, res)
    )
  return new Map<string, Route>([
    ["/fleet", fixedFile("text/html; charset=utf-8", pageFile("fleet.html"), { "content-security-policy": PAGE_POLICY })],
    ["/fleet.js", fixedFile("text/javascript; charset=utf-8", pageFile("fleet.js"))],
    [
      "/fleet.json",
      (req, res) =>
        void admit(req).then(
          (refusal) => (refusal ?? serveSnapshot)(req, res),
          () => unavailable(req, res)
        )
    ]
  ])
}
