// Who calls the registry API (docs/deploy.md "Credentials"): `Authorization: Bearer <key>` is
// the deployment token or an operator key (the operator role), a worker key, or a JWT that a
// `jwt` provider of a worker entry accepts (the worker role, with that entry's grant). Keys are
// compared by SHA-256 in constant time, every one of them, so the time taken tells nothing.
// Without `credentials` the deployment token is the one credential and holds every role. A
// credentials file is read again on SIGHUP and when it changes (serving/FileReload.ts).
import { createHash, timingSafeEqual } from "node:crypto"
import { Context, Effect, Layer, Option, Redacted, Result } from "effect"
import { AppConfig } from "../AppConfig.js"
import type { PinboardConfig } from "../Config.js"
import { InvalidDeploymentToken } from "../Errors.js"
import { reloadWhileScoped } from "../serving/FileReload.js"
import { type CredentialSet, credentialSourceOf, describeSource, loadCredentialSet, type WorkerJwt } from "../config/CredentialSet.js"
import type { FetchJwks } from "./Jwks.js"
import { makeProvider, type Provider } from "./Providers.js"
import { grantOf, type WorkerGrant } from "./WorkerGrant.js"

export type RegistryCaller =
  | { readonly _tag: "Operator"; readonly name: string }
  | { readonly _tag: "Worker"; readonly name: string; readonly grant: WorkerGrant }

export interface CredentialsService {
  /** The caller an `Authorization` header names; none matching: `401 invalid deployment token`. */
  readonly identify: (authorization: string | undefined) => Effect.Effect<RegistryCaller, InvalidDeploymentToken>
}

const sha256 = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest()

const EMPTY_SET: CredentialSet = { operators: [], workerKeys: [], workerJwts: [] }

/** The deployment token's name in logs and in what a caller is. */
const DEPLOYMENT_TOKEN_NAME = "deployment token"

const refused = Effect.fail(new InvalidDeploymentToken())

/** Three base64url parts: worth asking the providers about. */
const looksLikeJwt = (credential: string): boolean => /^[\w-]+\.[\w-]+\.[\w-]*$/.test(credential)

export const makeCredentials = (
  config: Pick<PinboardConfig, "token" | "credentials" | "hostnameAware" | "providers" | "attestation">,
  initial: CredentialSet,
  fetchJwks?: FetchJwks
) => {
  const tokenDigest = config.token === undefined ? undefined : sha256(Redacted.value(config.token))
  let set = initial
  // Made on first use, each with its own JWKS cache: a reloaded set may name another provider.
  const providers = new Map<string, Provider>()
  const providerNamed = (name: string): Effect.Effect<Provider> => {
    const made = providers.get(name)
    if (made !== undefined) return Effect.succeed(made)
    return Effect.tap(makeProvider(config.providers[name]!, fetchJwks), (provider) => Effect.sync(() => providers.set(name, provider)))
  }

  /** The worker entries whose provider accepts the token and whose subjects include its subject. */
  const viaProviders = (credential: string, entries: ReadonlyArray<WorkerJwt>): Effect.Effect<RegistryCaller, InvalidDeploymentToken> =>
    Effect.gen(function* () {
      const accepted: Array<WorkerJwt> = []
      let subject: string | undefined
      for (const name of new Set(entries.map((entry) => entry.provider))) {
        const principal = yield* (yield* providerNamed(name))(credential)
        if (Option.isNone(principal)) continue
        subject = principal.value.subject
        for (const entry of entries) {
          if (entry.provider === name && (entry.subjects === undefined || (subject !== undefined && entry.subjects.has(subject)))) accepted.push(entry)
        }
      }
      if (accepted.length === 0) return yield* refused
      return { _tag: "Worker", name: accepted.map((entry) => entry.name).join(","), grant: grantOf(accepted, subject) } as const
    })

  const identify = (authorization: string | undefined): Effect.Effect<RegistryCaller, InvalidDeploymentToken> => {
    if (authorization === undefined || !authorization.startsWith("Bearer ")) return refused
    const credential = authorization.slice("Bearer ".length)
    const digest = sha256(credential)
    const current = set
    let operator = tokenDigest !== undefined && timingSafeEqual(digest, tokenDigest) ? DEPLOYMENT_TOKEN_NAME : undefined
    for (const entry of current.operators) if (timingSafeEqual(digest, entry.digest)) operator ??= entry.name
    let worker: CredentialSet["workerKeys"][number] | undefined
    for (const entry of current.workerKeys) if (timingSafeEqual(digest, entry.digest)) worker ??= entry
    if (operator !== undefined) return Effect.succeed({ _tag: "Operator", name: operator })
    if (worker !== undefined) return Effect.succeed({ _tag: "Worker", name: worker.name, grant: grantOf([worker], undefined) })
    if (current.workerJwts.length === 0 || !looksLikeJwt(credential)) return refused
    return viaProviders(credential, current.workerJwts)
  }

  /** Takes the file's set when it loads; returns why not when it does not. */
  const reload = (): Result.Result<CredentialSet, string> => {
    const source = credentialSourceOf(config.credentials)
    if (source === undefined) return Result.succeed(set)
    return Result.tap(loadCredentialSet(source, config), (loaded) => {
      set = loaded
    })
  }
  return { identify, reload }
}

export class Credentials extends Context.Service<Credentials, CredentialsService>()("pinboard/Credentials") {
  static readonly layer: Layer.Layer<Credentials, never, AppConfig> = Layer.effect(
    Credentials,
    Effect.gen(function* () {
      const config = yield* AppConfig
      const source = credentialSourceOf(config.credentials)
      // Config.ts has loaded this set once already: a failure now is a file changed meanwhile.
      const initial =
        source === undefined
          ? EMPTY_SET
          : yield* Result.match(loadCredentialSet(source, config), {
            onFailure: (problem) => Effect.die(new Error(`${describeSource(source)}: ${problem}`)),
            onSuccess: Effect.succeed
          })
      const credentials = makeCredentials(config, initial)
      if (source?._tag === "File") {
        yield* reloadWhileScoped([source.path], (trigger) =>
          Result.match(credentials.reload(), {
            onSuccess: () => Effect.logInfo("credentials loaded").pipe(Effect.annotateLogs({ trigger, file: source.path })),
            onFailure: (reason) =>
              Effect.logWarning("credentials refused, the set in use is kept").pipe(Effect.annotateLogs({ trigger, file: source.path, reason }))
          })
        )
      }
      return { identify: credentials.identify }
    })
  )
}
