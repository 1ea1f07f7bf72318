// Settings held in files that are read again without a restart (docs/deploy.md "TLS",
// "Credentials"): on SIGHUP, and when a file changes. Files are polled (`watchFile`), which also
// sees a file replaced by a rename (cert-manager, certbot, a Kubernetes secret's symlink swap);
// a change waits a moment for its companions, written one after the other.
import { unwatchFile, watchFile } from "node:fs"
import { Effect, type Scope } from "effect"

export type ReloadTrigger = "SIGHUP" | "file change"

/** How often the files are looked at, and how long a change waits for its companion files. */
const WATCH_INTERVAL_MS = 1000
const SETTLE_MS = 250

/** Calls `reload` on SIGHUP and once a change to any of `paths` has settled; returns the stop. */
export const reloadOnChange = (paths: ReadonlyArray<string>, reload: (trigger: ReloadTrigger) => void): (() => void) => {
  let settling: ReturnType<typeof setTimeout> | undefined
  const onSignal = () => reload("SIGHUP")
  const onChange = () => {
    clearTimeout(settling)
    settling = setTimeout(() => reload("file change"), SETTLE_MS)
  }
  process.on("SIGHUP", onSignal)
  for (const path of paths) watchFile(path, { interval: WATCH_INTERVAL_MS }, onChange)
  return () => {
    clearTimeout(settling)
    process.off("SIGHUP", onSignal)
    for (const path of paths) unwatchFile(path, onChange)
  }
}

/** `reloadOnChange` while the scope is open, each reload an Effect run in the scope's context (its logger). */
export const reloadWhileScoped = (paths: ReadonlyArray<string>, reload: (trigger: ReloadTrigger) => Effect.Effect<void>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const run = Effect.runForkWith(yield* Effect.context<never>())
    yield* Effect.acquireRelease(Effect.sync(() => reloadOnChange(paths, (trigger) => run(reload(trigger)))), (stop) => Effect.sync(stop))
  })
