// Groups the calls made in one turn of the event loop per bucket, so that concurrent
// resolves on a bucket travel as one script call (each still resolved on its own, in
// order, atomically). The batch leaves once the current microtasks have run.
import { Effect } from "effect"

type Resume<A, E> = (effect: Effect.Effect<A, E>) => void

export const makeBatcher = <In, Out, E>(
  groups: number,
  send: (group: number, inputs: ReadonlyArray<In>) => Promise<ReadonlyArray<Out>>,
  onError: (cause: unknown) => E
): ((group: number, input: In) => Effect.Effect<Out, E>) => {
  const inputs: Array<Array<In>> = Array.from({ length: groups }, () => [])
  const waiting: Array<Array<Resume<Out, E>>> = Array.from({ length: groups }, () => [])
  let scheduled = false

  const flush = () => {
    scheduled = false
    for (let group = 0; group < groups; group++) {
      if (inputs[group]!.length === 0) continue
      const batch = inputs[group]!
      const resumes = waiting[group]!
      inputs[group] = []
      waiting[group] = []
      send(group, batch).then(
        (outputs) => resumes.forEach((resume, i) => resume(Effect.succeed(outputs[i]!))),
        (cause) => {
          const error = Effect.fail(onError(cause))
          for (const resume of resumes) resume(error)
        }
      )
    }
  }

  return (group, input) =>
    Effect.async<Out, E>((resume) => {
      inputs[group]!.push(input)
      waiting[group]!.push(resume)
      if (!scheduled) {
        scheduled = true
        process.nextTick(flush)
      }
    })
}
