// Groups the calls made in one turn of the event loop per bucket, so that concurrent
// resolves on a bucket travel as one script call (each still resolved on its own, in
// order, atomically). The batch leaves at the end of the turn (`setImmediate`, where
// ioredis's auto-pipelining sent its calls), so it holds the resolves of every request
// read in that turn, not only those of one socket's read; each caller gets its own reply
// through its own decoder (ResolveWire.ts), which may make it a defect.
import { Effect } from "effect"

type Resume<A, E> = (effect: Effect.Effect<A, E>) => void
type Decode<Raw> = (raw: Raw) => Effect.Effect<unknown>

export const makeBatcher = <In, Raw, E>(
  groups: number,
  send: (group: number, inputs: ReadonlyArray<In>) => Promise<ReadonlyArray<Raw>>,
  onError: (cause: unknown) => E
): (<Out>(group: number, input: In, decode: (raw: Raw) => Effect.Effect<Out>) => Effect.Effect<Out, E>) => {
  const inputs: Array<Array<In>> = Array.from({ length: groups }, () => [])
  const waiting: Array<Array<Resume<unknown, E>>> = Array.from({ length: groups }, () => [])
  const decoders: Array<Array<Decode<Raw>>> = Array.from({ length: groups }, () => [])
  /** The groups with inputs this turn, in the order they got their first. */
  let touched: Array<number> = []

  const flush = () => {
    const now = touched
    touched = []
    for (const group of now) {
      const batch = inputs[group]!
      const resumes = waiting[group]!
      const decodes = decoders[group]!
      inputs[group] = []
      waiting[group] = []
      decoders[group] = []
      send(group, batch).then(
        (outputs) => {
          for (let i = 0; i < resumes.length; i++) resumes[i]!(decodes[i]!(outputs[i]!))
        },
        (cause) => {
          const error = Effect.fail(onError(cause))
          for (const resume of resumes) resume(error)
        }
      )
    }
  }

  return <Out>(group: number, input: In, decode: (raw: Raw) => Effect.Effect<Out>) =>
    Effect.callback<Out, E>((resume) => {
      if (inputs[group]!.length === 0) {
        if (touched.length === 0) setImmediate(flush)
        touched.push(group)
      }
      inputs[group]!.push(input)
      waiting[group]!.push(resume as Resume<unknown, E>)
      decoders[group]!.push(decode)
    })
}
