// Real time in tests: every bound a test puts on the wall clock (a timeout, a deadline, a
// "within N ms", how long to wait for a process to be ready) goes through `scaled`, so one
// knob, PINBOARD_TEST_TIME_SCALE (default 1), stretches them all on a slow or busy machine.
// Tests wait for events or poll for conditions; `quietWindow` is the one sleep they keep, for
// checks that something does NOT happen.

const parseScale = (raw: string | undefined): number => {
  if (raw === undefined || raw === "") return 1
  const scale = Number(raw)
  if (!Number.isFinite(scale) || scale < 1) throw new Error(`PINBOARD_TEST_TIME_SCALE must be a number >= 1, got ${JSON.stringify(raw)}`)
  return scale
}

/** PINBOARD_TEST_TIME_SCALE: how much longer than nominal every real-time bound of the tests is. */
export const TIME_SCALE = parseScale(process.env.PINBOARD_TEST_TIME_SCALE)

/** A nominal real-time bound in ms, stretched by PINBOARD_TEST_TIME_SCALE. */
export const scaled = (ms: number): number => Math.round(ms * TIME_SCALE)

/** How often polls look again: a cadence, not a bound, so it does not scale. */
const POLL_EVERY_MS = 20

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export interface PollOptions {
  /** Nominal ms (scaled here) before giving up. */
  readonly timeoutMs: number
  /** What is awaited, for the failure's message. */
  readonly reason: string
  /** Cadence of the looks; default 20 ms. */
  readonly everyMs?: number
}

/** Resolves with the first value of `condition` that is neither undefined nor false; fails after `timeoutMs` (scaled). */
export const poll = async <A>(condition: () => Promise<A | undefined | false> | A | undefined | false, options: PollOptions): Promise<A> => {
  const timeoutMs = scaled(options.timeoutMs)
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const value = await condition()
    if (value !== undefined && value !== false) return value
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${options.reason}`)
    await pause(options.everyMs ?? POLL_EVERY_MS)
  }
}

/**
 * Polls `check` until it stops throwing, for effects the contract orders only loosely (a nack
 * counted, a placement released, while or after the answer is written). Rethrows the last
 * failure after `timeoutMs` (nominal, scaled here).
 */
export const eventually = async <A>(check: () => Promise<A> | A, timeoutMs = 2000): Promise<A> => {
  const deadline = performance.now() + scaled(timeoutMs)
  for (;;) {
    try {
      return await check()
    } catch (error) {
      if (performance.now() > deadline) throw error
      await pause(POLL_EVERY_MS)
    }
  }
}

/**
 * Lets `ms` (nominal, scaled here) of real time pass, for a check that something does NOT
 * happen: no event can end such a wait. Every call site says why it needs the window.
 */
export const quietWindow = (ms: number): Promise<void> => pause(scaled(ms))

/** `promise`, or a failure naming `reason` once `timeoutMs` (nominal, scaled) have passed without it settling. */
export const within = <A>(promise: Promise<A>, timeoutMs: number, reason: string): Promise<A> => {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${reason}: not within ${scaled(timeoutMs)} ms`)), scaled(timeoutMs))
  })
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}
