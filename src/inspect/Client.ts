// The registry API as `pinboard inspect` reads it (docs/registry-api.md): two GETs with the deployment
// token, the workers' one page by page. Every failure is typed, so that the command can print
// it and exit 1.
import http from "node:http"
import https from "node:https"
import { Data, Duration, Effect, Result, Redacted, Schema } from "effect"
import { type ListedWorker, PlacementAnswer, WorkersAnswer } from "./Answers.js"

/** No answer (refused, reset, DNS, timeout). */
export class PinboardUnreachable extends Data.TaggedError("PinboardUnreachable")<{
  readonly url: string
  readonly reason: string
}> {}

/** An answer other than the call's success; `body` as received. */
export class PinboardAnswered extends Data.TaggedError("PinboardAnswered")<{
  readonly url: string
  readonly status: number
  readonly body: string
}> {}

/** A success status with a body that is not the documented one. */
export class UnexpectedAnswer extends Data.TaggedError("UnexpectedAnswer")<{
  readonly url: string
  readonly body: string
}> {}

export type RegistryReadError = PinboardUnreachable | PinboardAnswered | UnexpectedAnswer

const CALL_TIMEOUT = Duration.seconds(5)

export interface RegistryTarget {
  /** Base URL, no trailing "/". */
  readonly pinboard: string
  readonly token: Redacted.Redacted<string>
}

interface RawAnswer {
  readonly status: number
  readonly body: string
}

/** A refused connection tried on several addresses is an AggregateError without a message. */
const whyUnreachable = (error: unknown): string =>
  error instanceof Error ? error.message || (error as NodeJS.ErrnoException).code || error.name : String(error)

/**
 * One GET through node:http, the path sent as written: fetch's URL parsing would drop the dot
 * segments that `.` and `..` (valid ids) make.
 */
const get = (target: RegistryTarget, path: string): Effect.Effect<RawAnswer, PinboardUnreachable> => {
  const url = `${target.pinboard}${path}`
  return Effect.callback<RawAnswer, PinboardUnreachable>((resume, signal) => {
    const base = new URL(target.pinboard)
    const client = base.protocol === "https:" ? https : http
    const req = client.request(
      {
        protocol: base.protocol,
        hostname: base.hostname.replace(/^\[(.*)\]$/, "$1"),
        port: base.port,
        path: `${base.pathname.replace(/\/+$/, "")}${path}`,
        headers: { authorization: `Bearer ${Redacted.value(target.token)}` },
        // One connection per call: nothing left open to keep the process alive.
        agent: false,
        signal
      },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (chunk: Buffer) => chunks.push(chunk))
        res.on("error", (error) => resume(Effect.fail(new PinboardUnreachable({ url, reason: whyUnreachable(error) }))))
        res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") })))
      }
    )
    req.on("error", (error) => resume(Effect.fail(new PinboardUnreachable({ url, reason: whyUnreachable(error) }))))
    req.end()
  }).pipe(
    Effect.timeoutOrElse({
      duration: CALL_TIMEOUT,
      orElse: () => Effect.fail(new PinboardUnreachable({ url, reason: `no answer within ${Duration.format(CALL_TIMEOUT)}` }))
    })
  )
}

const decodeAnswerBody = <A>(schema: Schema.Decoder<A>, url: string, body: string): Effect.Effect<A, UnexpectedAnswer> =>
  Schema.decodeUnknownEffect(Schema.fromJsonString(schema))(body).pipe(Effect.mapError(() => new UnexpectedAnswer({ url, body })))

/**
 * Every worker: `GET /registry/workers`, then again with `cursor` = the answer's `next` until an
 * answer has none (Pinboard cuts an answer at 1 MiB). A `next` equal to the cursor sent would
 * never end, so it is reported as unexpected.
 */
export const listWorkers = Effect.fn("Inspect.listWorkers")(function*(target: RegistryTarget) {
  const workers: Array<ListedWorker> = []
  let cursor: string | undefined
  for (;;) {
    // The cursor is opaque: escaped, though Pinboard's need no escaping today.
    const path = cursor === undefined ? "/registry/workers" : `/registry/workers?cursor=${encodeURIComponent(cursor)}`
    const url = `${target.pinboard}${path}`
    const answer = yield* get(target, path)
    if (answer.status !== 200) return yield* new PinboardAnswered({ url, ...answer })
    const page = yield* decodeAnswerBody(WorkersAnswer, url, answer.body)
    workers.push(...page.workers)
    if (page.next === undefined) return workers
    if (page.next === cursor) return yield* new UnexpectedAnswer({ url, body: answer.body })
    cursor = page.next
  }
})

const NotPlacedAnswer = Schema.fromJsonString(Schema.Struct({ error: Schema.Literal("not placed") }))

/** The id's placement row; undefined when it has none (`404 {"error":"not placed"}`). */
export const getPlacement = Effect.fn("Inspect.getPlacement")(function*(
  target: RegistryTarget,
  key: { readonly env: string; readonly namespace: string; readonly id: string }
) {
  // docs/registry-api.md: the placements URL drops the namespace's "/".
  // Namespaces, ids and envs are made of URL-safe characters: no escaping needed.
  const path = `/registry/placements/${key.namespace.slice(1)}/${key.id}${key.env === "" ? "" : `?env=${key.env}`}`
  const url = `${target.pinboard}${path}`
  const answer = yield* get(target, path)
  if (answer.status === 404 && Result.isSuccess(Schema.decodeUnknownResult(NotPlacedAnswer)(answer.body))) return undefined
  if (answer.status !== 200) return yield* new PinboardAnswered({ url, ...answer })
  return yield* decodeAnswerBody(PlacementAnswer, url, answer.body)
})
