// TLS on the data-plane listener (docs/deploy.md "TLS"): the certificate and key files read and
// checked as a pair, and read again on SIGHUP and when either file changes (FileReload.ts).
// New connections get the new pair, open ones keep theirs; a
// pair that does not load is refused and the one in use kept.
import { readFileSync } from "node:fs"
import { createSecureContext, type SecureContextOptions, type TlsOptions } from "node:tls"
import { Result } from "effect"
import { reloadOnChange, type ReloadTrigger } from "./FileReload.js"

export interface TlsFiles {
  readonly cert: string
  readonly key: string
}

/** The files `tls.cert` and `tls.key` name; undefined when TLS is off (the schema has them both or neither). */
export const tlsFilesOf = (settings: { readonly cert: string | undefined; readonly key: string | undefined }): TlsFiles | undefined =>
  settings.cert === undefined || settings.key === undefined ? undefined : { cert: settings.cert, key: settings.key }

/** A pair that cannot be used: the setting at fault and why. */
export interface TlsProblem {
  readonly field: "cert" | "key"
  readonly message: string
}

/** What every pair's context has: TLS 1.2 or later, with Node's default ciphers. */
const CONTEXT_SETTINGS = { minVersion: "TLSv1.2" } as const satisfies SecureContextOptions

/** The listener's options for a loaded pair: the pair, and what ALPN offers (HTTP/2 first where it is on). */
export const listenerTlsOptions = (pair: SecureContextOptions, http2: boolean): TlsOptions => ({
  ...pair,
  ALPNProtocols: http2 ? ["h2", "http/1.1"] : ["http/1.1"]
})

const pem = (field: TlsProblem["field"], path: string): Result.Result<string, TlsProblem> => {
  try {
    const text = readFileSync(path, "utf8")
    return text.includes("-----BEGIN ")
      ? Result.succeed(text)
      : Result.fail({ field, message: `expected a PEM file, got ${JSON.stringify(path)} without a "-----BEGIN" line` })
  } catch (error) {
    return Result.fail({ field, message: `cannot read ${JSON.stringify(path)} (${error instanceof Error ? error.message : String(error)})` })
  }
}

/** The files' pair, once OpenSSL has taken it (a key that is not the certificate's is refused here). */
export const loadTlsPair = (files: TlsFiles): Result.Result<SecureContextOptions, TlsProblem> =>
  Result.gen(function* () {
    const pair = { ...CONTEXT_SETTINGS, cert: yield* pem("cert", files.cert), key: yield* pem("key", files.key) }
    try {
      createSecureContext(pair)
    } catch (error) {
      return yield* Result.fail<TlsProblem>({ field: "key", message: `not usable with the certificate (${error instanceof Error ? error.message : String(error)})` })
    }
    return pair
  })

export interface TlsReloadEvents {
  readonly loaded: (trigger: ReloadTrigger) => void
  readonly refused: (trigger: ReloadTrigger, problem: TlsProblem) => void
}

/** Reads the pair again on SIGHUP and when a file changes, and gives each pair that loads to `apply`; returns the stop. */
export const reloadTlsOnChange = (files: TlsFiles, apply: (pair: SecureContextOptions) => void, events: TlsReloadEvents): (() => void) =>
  reloadOnChange([files.cert, files.key], (trigger) =>
    Result.match(loadTlsPair(files), {
      onFailure: (problem) => events.refused(trigger, problem),
      onSuccess: (pair) => {
        apply(pair)
        events.loaded(trigger)
      }
    })
  )
