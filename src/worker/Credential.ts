// What a worker presents to the registry (docs/worker.md "Credentials"): the deployment token,
// or a worker credential (a worker key, or a JWT from one of Pinboard's `jwt` providers) given
// as a string, a function giving the current one, or a file read again on every registry call
// (a Kubernetes projected service-account token is rewritten in place before it expires).
import { readFile } from "node:fs/promises"
import { Data } from "effect"

/** A worker credential: as it is, or a function giving the one to present now. */
export type WorkerCredentialSource = string | (() => string | Promise<string>)

/** Exactly one of the three. */
export interface CredentialOptions {
  /** The deployment token: it opens every registry call, and the HS256 attestation key derives from it. */
  readonly token?: string | undefined
  /** A worker key, or a JWT for one of Pinboard's `jwt` providers. */
  readonly credential?: WorkerCredentialSource | undefined
  /** A file holding the credential, read again on every registry call. */
  readonly credentialFile?: string | undefined
}

export interface PresentedCredential {
  /** The deployment token, when that is what the worker was given. */
  readonly token: string | undefined
  /** What a registry call presents now as `Authorization: Bearer`; rejects when it cannot be had (a file not read). */
  readonly current: () => Promise<string>
}

/** The worker cannot start as configured: which credential, or why nothing could verify its requests. */
export class WorkerCredentialError extends Data.TaggedError("WorkerCredentialError")<{ readonly message: string }> {}

const CREDENTIAL_OPTIONS = ["token", "credential", "credentialFile"] as const

const fromFile = async (path: string): Promise<string> => {
  let text: string
  try {
    text = await readFile(path, "utf8")
  } catch (error) {
    throw new Error(`credential file ${path}: ${error instanceof Error ? error.message : String(error)}`)
  }
  const credential = text.trim()
  if (credential === "") throw new Error(`credential file ${path} is empty`)
  return credential
}

/** The one credential the options give; a WorkerCredentialError naming what was given when that is not exactly one. */
export const presentedCredential = (options: CredentialOptions): PresentedCredential => {
  const given = CREDENTIAL_OPTIONS.filter((name) => options[name] !== undefined)
  if (given.length !== 1) {
    throw new WorkerCredentialError({
      message: `the worker takes exactly one of token, credential and credentialFile; got ${given.length === 0 ? "none" : given.join(" and ")}`
    })
  }
  const { token, credential, credentialFile } = options
  if (token !== undefined) return { token, current: () => Promise.resolve(token) }
  if (credentialFile !== undefined) return { token: undefined, current: () => fromFile(credentialFile) }
  const source = credential!
  return { token: undefined, current: typeof source === "string" ? () => Promise.resolve(source) : async () => source() }
}
