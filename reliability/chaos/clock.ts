// A Pinboard replica's wall clock, movable while it runs: each Pinboard of the chaos run starts
// under libfaketime, whose offset it reads from a file of its own (FAKETIME_TIMESTAMP_FILE),
// again at the first clock call of every new second. Only the wall clock moves
// (FAKETIME_DONT_FAKE_MONOTONIC=1): a real clock step (an NTP step, a VM resumed) moves
// CLOCK_REALTIME, never CLOCK_MONOTONIC, so Date.now() jumps while performance.now() and the
// timers go on as before.
//
// The multithreaded variant (libfaketimeMT) is the one used: Node calls the clock from
// several threads. libfaketime 0.9.10 reads an offset in the file as `+3.000s` / `-3.000s`
// (relative to the real clock; `+0.000s` is the real clock).
//
// The cache: libfaketime reads the file again once the real clock's whole seconds have moved
// on by more than FAKETIME_CACHE_DURATION since the last read. So FAKETIME_CACHE_DURATION=1
// takes up to 2 s to see a rewrite (measured: 0.17 to 1.96 s over 15 rewrites), and
// FAKETIME_CACHE_DURATION=0 reads it at the first call of each new second: up to 1 s
// (measured: 0.09 to 0.99 s). FAKETIME_NO_CACHE=1 would see it at once, but reads the file on
// every call: Date.now() took 7.4 µs, against 1.1 µs with either cache and 0.08 µs without
// the preload.
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const CANDIDATES = [
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
  "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
  "/usr/lib/faketime/libfaketimeMT.so.1",
  "/usr/local/lib/faketime/libfaketimeMT.so.1"
]

/** How long a rewrite of the file may take to reach the replica: the cache's second, and a margin. */
export const PICKUP_MS = 1200

/** The file's text for an offset: libfaketime's relative form, in seconds with milliseconds. */
export const offsetText = (offsetMs: number): string => `${offsetMs < 0 ? "-" : "+"}${(Math.abs(offsetMs) / 1000).toFixed(3)}s`

/** The environment that starts a process under libfaketime `lib`, its offset read from `file`. */
export const fakedClockEnv = (lib: string, file: string): Record<string, string> => ({
  LD_PRELOAD: lib,
  FAKETIME_TIMESTAMP_FILE: file,
  FAKETIME_CACHE_DURATION: "0",
  FAKETIME_DONT_FAKE_MONOTONIC: "1"
})

/**
 * libfaketimeMT, if it is installed and does what the run needs: a Node process started under
 * it with an offset of +100 s reports a wall clock 100 s ahead and a monotonic clock that is
 * not. Else why not, for the run to say before it skips the clock faults.
 */
export const findLibfaketime = (): { readonly lib: string } | { readonly missing: string } => {
  const lib = CANDIDATES.find((path) => existsSync(path))
  if (lib === undefined) return { missing: "libfaketime is not installed (Debian: apt-get install faketime)" }
  const dir = mkdtempSync(join(tmpdir(), "pinboard-faketime-"))
  try {
    const file = join(dir, "offset")
    writeFileSync(file, offsetText(100_000))
    const before = Date.now()
    const monoBefore = process.hrtime.bigint()
    // process.hrtime is CLOCK_MONOTONIC, the same clock in every process of the machine.
    const probe = spawnSync(process.execPath, ["-e", "console.log(JSON.stringify({ wall: Date.now(), mono: String(process.hrtime.bigint()) }))"], {
      env: { ...process.env, ...fakedClockEnv(lib, file) },
      encoding: "utf8",
      timeout: 30_000
    })
    const after = Date.now()
    const monoAfter = process.hrtime.bigint()
    const seen = JSON.parse(probe.stdout.trim() || "null") as { wall: number; mono: string } | null
    if (seen === null) return { missing: `${lib} did not run node: ${probe.stderr.trim() || probe.error?.message || `exit ${probe.status}`}` }
    const offset = seen.wall - before
    if (offset < 99_000 || offset > 100_000 + (after - before) + 1000) return { missing: `${lib} moved node's wall clock by ${offset} ms, not +100 s` }
    const mono = BigInt(seen.mono)
    if (mono < monoBefore || mono > monoAfter) return { missing: `${lib} moved node's monotonic clock too (FAKETIME_DONT_FAKE_MONOTONIC not honoured)` }
    return { lib }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** The offset of one replica's wall clock, and what its log lines show of it. */
export interface ReplicaClock {
  readonly file: string
  /** The offset last written (ms). */
  readonly offsetMs: () => number
  /** Writes `offsetMs` to the file, whole (a rename), for the replica to read within PICKUP_MS. */
  readonly set: (offsetMs: number) => void
  /** Whether the replica's clock may be off now: an offset set, or one healed within PICKUP_MS. */
  readonly mayBeOff: () => boolean
  /** A line of the replica's, with its `time`: samples how far its clock is from ours. */
  readonly observe: (line: string) => void
  /** The last sample: when (our clock) and the line's time less ours (ms). */
  readonly observed: () => { readonly at: number; readonly offsetMs: number } | undefined
}

const TIME_FIELD = /^\{"time":"([^"]+)"/
/** Sample a replica's lines at most this often: they come by thousands a second. */
const SAMPLE_EVERY_MS = 50

export const replicaClock = (file: string): ReplicaClock => {
  let offset = 0
  let changedAt = 0
  let sample: { at: number; offsetMs: number } | undefined
  const set = (offsetMs: number) => {
    offset = offsetMs
    changedAt = Date.now()
    writeFileSync(`${file}.next`, offsetText(offsetMs))
    renameSync(`${file}.next`, file)
  }
  set(0)
  changedAt = 0
  return {
    file,
    offsetMs: () => offset,
    set,
    mayBeOff: () => offset !== 0 || Date.now() - changedAt < PICKUP_MS,
    observe: (line) => {
      const now = Date.now()
      if (sample !== undefined && now - sample.at < SAMPLE_EVERY_MS) return
      const time = TIME_FIELD.exec(line)?.[1]
      if (time === undefined) return
      const at = Date.parse(time)
      if (Number.isFinite(at)) sample = { at: now, offsetMs: at - now }
    },
    observed: () => sample
  }
}
