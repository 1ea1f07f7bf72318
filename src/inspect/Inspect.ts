// `pinboard inspect` (docs/inspect.md): Pinboard's configuration for the deployment token (or an
// operator key from --key-file) and
// the placement policy, two reads of the registry API, the explanation, then text or JSON.
// Exit codes: 0 done; 1 Pinboard unreachable or answered an error; 2 bad usage or configuration.
import { readFileSync } from "node:fs"
import { Clock, Console, Effect, Redacted, Result } from "effect"
import { ConfigInvalid, loadConfig, type PinboardConfig } from "../Config.js"
import type { Env } from "../config/Sources.js"
import { bucketOf } from "../contract/Bucket.js"
import { type InspectCommand, parseInspectArgs, USAGE, InspectUsageError } from "./Args.js"
import { getPlacement, listWorkers, type RegistryReadError, type RegistryTarget } from "./Client.js"
import { explainResolve } from "./Explain.js"
import { idJson, idText, workersJson, workersText } from "./Render.js"

type ExitCode = 0 | 1 | 2

/** `argv` is what follows `inspect`. Sets `process.exitCode`; never fails. */
export const inspect = (argv: ReadonlyArray<string>, env: Env): Effect.Effect<void> =>
  Effect.suspend(() => run(argv, env)).pipe(
    Effect.catchTags({
      InspectUsageError: (e) => complain(2, `${e.message}\nRun \`pinboard inspect --help\` for the usage.`),
      ConfigInvalid: (e) => complain(2, `invalid configuration: ${e.message}`),
      PinboardUnreachable: (e) => complain(1, `cannot reach Pinboard: GET ${e.url}: ${e.reason}`),
      PinboardAnswered: (e) => complain(1, `GET ${e.url} answered ${e.status}: ${e.body}`),
      UnexpectedAnswer: (e) => complain(1, `GET ${e.url} answered something unexpected: ${e.body}`)
    }),
    Effect.flatMap((code) => Effect.sync(() => void (process.exitCode = code)))
  )

const complain = (code: ExitCode, message: string) => Effect.as(Console.error(`pinboard inspect: ${message}`), code)

const run = (argv: ReadonlyArray<string>, env: Env): Effect.Effect<ExitCode, InspectUsageError | ConfigInvalid | RegistryReadError> =>
  Effect.gen(function*() {
    const command = yield* Result.match(parseInspectArgs(argv), { onFailure: Effect.fail, onSuccess: Effect.succeed })
    if (command._tag === "Help") {
      yield* Console.log(USAGE)
      return 0 as const
    }
    const config = yield* loadConfig({ flags: { config: command.options.config }, env })
    const token = yield* credentialOf(command.options.keyFile, config)
    const target: RegistryTarget = { pinboard: command.options.pinboard ?? defaultPinboardUrl(config), token }
    yield* Console.log(command._tag === "Workers" ? yield* inspectWorkers(command, target) : yield* inspectId(command, config, target))
    return 0 as const
  })

/** The operator key in `--key-file` (its one line), else the deployment token. */
const credentialOf = (keyFile: string | undefined, config: PinboardConfig): Effect.Effect<Redacted.Redacted<string>, InspectUsageError> => {
  if (keyFile === undefined) {
    return config.token === undefined
      ? Effect.fail(new InspectUsageError({ message: "the configuration has no deployment token: give an operator key with --key-file FILE" }))
      : Effect.succeed(config.token)
  }
  return Effect.try({
    try: () => readFileSync(keyFile, "utf8").replace(/\r?\n$/, ""),
    catch: (error) => new InspectUsageError({ message: `--key-file: cannot read ${JSON.stringify(keyFile)} (${error instanceof Error ? error.message : String(error)})` })
  }).pipe(
    Effect.filterOrFail((key) => key !== "", () => new InspectUsageError({ message: `--key-file: ${JSON.stringify(keyFile)} is empty` })),
    Effect.map(Redacted.make)
  )
}

const inspectWorkers = Effect.fn("Inspect.workers")(function*(
  command: Extract<InspectCommand, { _tag: "Workers" }>,
  target: RegistryTarget
) {
  const listed = yield* listWorkers(target)
  const report = { pinboard: target.pinboard, now: yield* Clock.currentTimeMillis, workers: listed }
  return command.options.json ? workersJson(report) : workersText(report)
})

const inspectId = Effect.fn("Inspect.id")(function*(
  command: Extract<InspectCommand, { _tag: "Id" }>,
  config: PinboardConfig,
  target: RegistryTarget
) {
  const { env, namespace, hostname } = command
  const { placement, listed } = yield* Effect.all(
    { placement: getPlacement(target, { env, namespace, id: command.id }), listed: listWorkers(target) },
    { concurrency: "unbounded" }
  )
  const now = yield* Clock.currentTimeMillis
  const affinity = command.affinity ?? ""
  const report = {
    pinboard: target.pinboard,
    now,
    env,
    hostname,
    namespace,
    id: command.id,
    bucket: bucketOf(env, namespace, command.id, config.buckets),
    buckets: config.buckets,
    placement,
    affinityKey: config.affinity.key,
    affinityGiven: command.affinity !== undefined,
    resolve: explainResolve({
      env,
      namespace,
      hostname,
      placement,
      workers: listed,
      now,
      leaseMs: config.leaseMs,
      balanceFactor: config.balanceFactor,
      affinity,
      caller: command.caller
    })
  }
  return command.options.json ? idJson(report) : idText(report)
})

/**
 * Where Pinboard's registry API listens by its configuration: its own listener (plain HTTP) when
 * `registry.port` is set, else the data port (HTTPS with `tls.cert`); a wildcard address is
 * reached on loopback.
 */
export const defaultPinboardUrl = (config: Pick<PinboardConfig, "host" | "port" | "registry" | "tls">): string => {
  const apart = config.registry.port !== undefined
  const port = config.registry.port ?? config.port
  const bound = apart ? (config.registry.host ?? config.host) : config.host
  const host = bound === "0.0.0.0" || bound === "::" ? "127.0.0.1" : bound
  const scheme = !apart && config.tls.cert !== undefined ? "https" : "http"
  return `${scheme}://${host.includes(":") ? `[${host}]` : host}:${port}`
}
