// A credentials set (docs/deploy.md "Credentials") loaded and checked: from the configuration
// or its file, at start-up (a problem stops the process with exit code 2) and on every reload (a
// problem keeps the set in use; auth/Credentials.ts). Keys are kept as their SHA-256 digests only.
import { readFileSync } from "node:fs"
import { Result, SchemaParser } from "effect"
import type { PinboardConfig } from "./Schema.js"
import { CredentialsSetting, SUBJECT_PLACEHOLDER, type WorkerJwtEntry, type WorkerKeyEntry } from "./Credentials.js"
import { describeParseError } from "./Messages.js"

/** A namespace a worker credential may serve: `hostname` "" outside hostname-aware mode, "*" for any. */
export interface NamespaceGrant {
  readonly namespace: string
  readonly hostname: string
  readonly env: string
}

interface GrantEntry {
  readonly name: string
  /** Worker ids, prefixes ending in `*`, `{sub}` still unresolved in a provider's entry. */
  readonly workers: ReadonlyArray<string>
  readonly namespaces: ReadonlyArray<NamespaceGrant>
}

export interface KeyEntry {
  readonly name: string
  readonly digest: Buffer
}

export interface WorkerKey extends GrantEntry {
  readonly digest: Buffer
}

export interface WorkerJwt extends GrantEntry {
  readonly provider: string
  /** Undefined: any subject the provider accepts. */
  readonly subjects: ReadonlySet<string> | undefined
}

export interface CredentialSet {
  readonly operators: ReadonlyArray<KeyEntry>
  readonly workerKeys: ReadonlyArray<WorkerKey>
  readonly workerJwts: ReadonlyArray<WorkerJwt>
}

/** What a set is checked against: the rest of the configuration, which a reload does not change. */
export type CredentialContext = Pick<PinboardConfig, "hostnameAware" | "providers" | "attestation">

/** Where a set came from, for its messages: `credentials`, or the file's name. */
export type CredentialSource = { readonly _tag: "Inline"; readonly value: unknown } | { readonly _tag: "File"; readonly path: string }

export const credentialSourceOf = (setting: PinboardConfig["credentials"]): CredentialSource | undefined =>
  setting === undefined ? undefined : typeof setting === "string" ? { _tag: "File", path: setting } : { _tag: "Inline", value: setting }

const decode = SchemaParser.decodeUnknownResult(CredentialsSetting, { onExcessProperty: "error", errors: "all" })

const isKeyEntry = (entry: WorkerKeyEntry | WorkerJwtEntry): entry is WorkerKeyEntry => "sha256" in entry

const contentOf = (source: CredentialSource): Result.Result<unknown, string> => {
  if (source._tag === "Inline") return Result.succeed(source.value)
  try {
    return Result.succeed(JSON.parse(readFileSync(source.path, "utf8")))
  } catch (error) {
    return Result.fail(error instanceof SyntaxError ? `invalid JSON (${error.message})` : `cannot read it (${error instanceof Error ? error.message : String(error)})`)
  }
}

/** The set, or one line per problem (each naming the entry's field) joined by line breaks. */
export const loadCredentialSet = (source: CredentialSource, context: CredentialContext): Result.Result<CredentialSet, string> =>
  Result.flatMap(contentOf(source), (input) =>
    Result.match(decode(input), {
      onFailure: (issue) => Result.fail(describeParseError(issue, input, [])),
      onSuccess: (setting) => checked(setting, context)
    })
  )

const grantsOf = (namespaces: WorkerKeyEntry["namespaces"]): ReadonlyArray<NamespaceGrant> =>
  namespaces.map((entry) =>
    typeof entry === "string" ? { namespace: entry, hostname: "", env: "" } : { ...entry, hostname: entry.hostname.toLowerCase() }
  )

/** What the schema cannot see: the entries against each other, the mode and the providers. */
const checked = (setting: CredentialsSetting, context: CredentialContext): Result.Result<CredentialSet, string> => {
  const problems: Array<string> = []
  const names = new Set<string>()
  const digests = new Set<string>()
  const entries = [
    ...setting.operators.map((entry, i) => ({ entry, at: `operators[${i}]` })),
    ...setting.workers.map((entry, i) => ({ entry, at: `workers[${i}]` }))
  ]
  for (const { entry, at } of entries) {
    if (names.has(entry.name)) problems.push(`${at}.name: expected a name no other entry has, got ${JSON.stringify(entry.name)}`)
    names.add(entry.name)
    if ("sha256" in entry) {
      if (digests.has(entry.sha256)) problems.push(`${at}.sha256: expected a key no other entry has`)
      digests.add(entry.sha256)
    }
  }
  setting.workers.forEach((entry, i) => {
    const at = `workers[${i}]`
    if (!isKeyEntry(entry)) {
      const provider = context.providers[entry.provider]
      if (provider?.type !== "jwt") problems.push(`${at}.provider: expected the name of a jwt provider in providers, got ${JSON.stringify(entry.provider)}`)
    } else {
      entry.workers.forEach((pattern, j) => {
        if (pattern.includes(SUBJECT_PLACEHOLDER)) problems.push(`${at}.workers[${j}]: expected no {sub} in an entry without a provider`)
      })
    }
    entry.namespaces.forEach((grant, j) => {
      if ((typeof grant === "string") === context.hostnameAware) {
        problems.push(
          `${at}.namespaces[${j}]: expected ${context.hostnameAware ? 'an object {"namespace","hostname","env"} in hostname-aware mode' : 'a namespace like "/threads" (objects are for hostname-aware mode)'}`
        )
      }
    })
  })
  if (setting.workers.length > 0 && context.attestation.keys.length === 0) {
    problems.push(
      "workers: expected attestation keys (attestation.keys, PINBOARD_ATTESTATION_KEYS) with worker credentials: the key derived from the deployment token would be a secret every worker holds"
    )
  }
  if (problems.length > 0) return Result.fail(problems.join("\n"))
  const digest = (hex: string) => Buffer.from(hex, "hex")
  return Result.succeed({
    operators: setting.operators.map((entry) => ({ name: entry.name, digest: digest(entry.sha256) })),
    workerKeys: setting.workers.filter(isKeyEntry).map((entry) => ({
      name: entry.name,
      digest: digest(entry.sha256),
      workers: entry.workers,
      namespaces: grantsOf(entry.namespaces)
    })),
    workerJwts: setting.workers
      .filter((entry): entry is WorkerJwtEntry => !isKeyEntry(entry))
      .map((entry) => ({
        name: entry.name,
        provider: entry.provider,
        subjects: entry.subjects === undefined ? undefined : new Set(entry.subjects),
        workers: entry.workers,
        namespaces: grantsOf(entry.namespaces)
      }))
  })
}

/** `credentials` (inline) or `PINBOARD_CREDENTIALS_FILE "<path>"` (a file), to start a message with. */
export const describeSource = (source: CredentialSource): string =>
  source._tag === "Inline" ? "credentials" : `credentials file ${JSON.stringify(source.path)}`
