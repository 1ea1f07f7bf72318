// How the data-plane server answers: a failure with its catalogue reply (a defect: 500,
// logged), and an instance request's outcome with what it was answered and, once the response
// closes, the status the client was sent, for the exchange's observer (observe/Exchange.ts).
import type { IncomingMessage, ServerResponse } from "node:http"
import { Cause, Effect, Result } from "effect"
import { type CatalogueError, internalError, type Reply } from "../Errors.js"
import { NO_FACTS, type ExchangeFacts, type OwnAnswer } from "../observe/Exchange.js"
import type { InstanceOutcome } from "../pipeline/Pipeline.js"
import type { MessageError } from "./Message.js"
import { writeReply } from "./Reply.js"

/** Why, where the error says (a 502's cause: `connect refused`, `header overflow`...). */
const reasonOf = (error: CatalogueError): string | undefined => ("reason" in error ? error.reason : undefined)

/** A 502's why, at debug level in the error log (the access log has it too, as `reason`). */
const logBadGateway = (error: CatalogueError, facts: ExchangeFacts) =>
  Effect.logDebug("bad gateway").pipe(
    Effect.annotateLogs({
      error: error._tag,
      reason: reasonOf(error),
      namespace: facts.namespace,
      id: facts.id,
      worker: facts.worker,
      epoch: facts.epoch,
      cause: error.cause === undefined ? undefined : String(error.cause)
    })
  )

const NOT_ANSWERED = Effect.succeed(undefined)

/**
 * Answers a failure: a catalogue error with its reply; anything else is a defect, logged and
 * answered `500 internal error`; an interruption, not at all. Gives what was answered.
 */
export const answerFailure = <E extends CatalogueError>(
  cause: Cause.Cause<E>,
  write: (reply: Reply) => void,
  facts: ExchangeFacts
): Effect.Effect<OwnAnswer | undefined> => {
  const failure = Cause.findError(cause)
  if (Result.isSuccess(failure)) {
    const error = failure.success
    const reply = error.reply
    const written = Effect.sync(() => {
      write(reply)
      return { error: error._tag, status: reply.status, reason: reasonOf(error) }
    })
    return reply.status === 502 ? Effect.andThen(logBadGateway(error, facts), written) : written
  }
  // Interrupted, or nothing to answer (an empty cause).
  if (cause.reasons.every(Cause.isInterruptReason)) return NOT_ANSWERED
  return Effect.andThen(
    Effect.logError("unhandled error", cause),
    Effect.sync(() => {
      write(internalError)
      return { error: "InternalError", status: internalError.status, reason: undefined }
    })
  )
}

/** One catch, so that a request that succeeds pays for one frame and one closure. */
const answering = <E extends CatalogueError, R>(handler: Effect.Effect<unknown, E, R>, write: (reply: Reply) => void): Effect.Effect<void, never, R> =>
  Effect.catchCause(handler, (cause) => Effect.asVoid(answerFailure(cause, write, NO_FACTS)))

/** A handler's failure answered with its catalogue reply (or 500). */
export const respond = <E extends CatalogueError, R>(req: IncomingMessage, res: ServerResponse, handler: Effect.Effect<unknown, E, R>) =>
  answering(handler, (reply) => writeReply(req, res, reply))

/** An instance request's outcome answered: what Pinboard wrote itself, if it did. */
export const answerOutcome = (outcome: Outcome, write: (reply: Reply) => void): Effect.Effect<OwnAnswer | undefined> =>
  outcome.failure === undefined ? NOT_ANSWERED : answerFailure<CatalogueError>(outcome.failure, write, outcome)

/** An instance request's outcome answered, unobserved (the pipeline harness's server). */
export const respondToOutcome = (req: IncomingMessage, res: ServerResponse, outcome: Effect.Effect<InstanceOutcome>) =>
  Effect.flatMap(outcome, (done) => answerOutcome(done, (reply) => writeReply(req, res, reply)))

/** A request RFC 9112 rules out (http/Message.ts), refused before the pipeline: nothing learned. */
interface RefusedBeforePipeline extends ExchangeFacts {
  readonly failure: Cause.Cause<MessageError>
}

/** What an instance request came to: through the pipeline, or refused before it. */
export type Outcome = InstanceOutcome | RefusedBeforePipeline

export const refusedOutcome = (error: MessageError): Effect.Effect<RefusedBeforePipeline> => Effect.succeed({ ...NO_FACTS, failure: Cause.fail(error) })
