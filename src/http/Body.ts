// Reads a small request body with a hard cap (the registry API's 64 KiB, docs/registry-api.md).
import type { IncomingMessage } from "node:http"
import { Effect } from "effect"
import { BodyTooLarge, InvalidRequest } from "../Errors.js"

export const REGISTRY_BODY_LIMIT = 64 * 1024

export const readBody = (req: IncomingMessage, limit: number): Effect.Effect<Buffer, BodyTooLarge | InvalidRequest> =>
  Effect.callback<Buffer, BodyTooLarge | InvalidRequest>((resume) => {
    const declared = Number(req.headers["content-length"] ?? 0)
    if (declared > limit) {
      req.resume()
      return resume(Effect.fail(new BodyTooLarge()))
    }
    const chunks: Array<Buffer> = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        cleanup()
        req.resume()
        resume(Effect.fail(new BodyTooLarge()))
      } else chunks.push(chunk)
    }
    const onEnd = () => {
      cleanup()
      resume(Effect.succeed(Buffer.concat(chunks, size)))
    }
    const onAbort = () => {
      cleanup()
      resume(Effect.fail(new InvalidRequest({ problem: "body: the request ended early" })))
    }
    const cleanup = () => {
      req.off("data", onData)
      req.off("end", onEnd)
      req.off("error", onAbort)
      req.off("aborted", onAbort)
    }
    req.on("data", onData)
    req.on("end", onEnd)
    req.on("error", onAbort)
    req.on("aborted", onAbort)
    return Effect.sync(cleanup)
  })

export const readJson = (req: IncomingMessage, limit: number): Effect.Effect<unknown, BodyTooLarge | InvalidRequest> =>
  Effect.flatMap(readBody(req, limit), (body) =>
    Effect.try({
      try: (): unknown => JSON.parse(body.toString("utf8")),
      catch: () => new InvalidRequest({ problem: "body: expected JSON" })
    })
  )
