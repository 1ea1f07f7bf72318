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
  /** The groups with inputs this turn, in the order they got their first. */
  let touched: Array<number> = []

  const flush = () => {
    const now = touched
    touched = []
    for (const group of now) {
      const batch = inputs[group]!
      const resumes = waiting[group]!
      inputs[group] = []
      waiting[group] = []
      send(group, batch).then(
        (outputs) => {
          for (let i = 0; i < resumes.length; i++) resumes[i]!(Effect.succeed(outputs[i]!))
        },
        (cause) => {
          const error = Effect.fail(onError(cause))
          for (const resume of resumes) resume(error)
        }
      )
    }
  }

  return (group, input) =>
    Effect.async<Out, E>((resume) => {
      if (inputs[group]!.length === 0) {
        if (touched.length === 0) process.nextTick(flush)
        touched.push(group)
      }
      inputs[group]!.push(input)
      waiting[group]!.push(resume)
    })
}
