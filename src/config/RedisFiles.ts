// The files the Redis settings name (docs/config.md "Options", docs/deploy.md "Managed Redis"): the password file (a mounted
// secret) and the TLS PEM files, read at start. Config.ts reads them once to refuse a missing or
// empty file with exit code 2; the connection reads them when it is made.
import { readFileSync } from "node:fs"
import { Result, Redacted } from "effect"
import type { PinboardConfig } from "./Schema.js"

type RedisSettings = PinboardConfig["redis"]

/** What the files hold; a field is undefined when its setting is. */
export interface RedisFileContents {
  readonly password: Redacted.Redacted<string> | undefined
  readonly ca: string | undefined
  readonly cert: string | undefined
  readonly key: string | undefined
}

/** A file that cannot be used: the setting's field and why. */
export interface RedisFileProblem {
  readonly field: "passwordFile" | "tlsCa" | "tlsCert" | "tlsKey"
  readonly message: string
}

const read = (field: RedisFileProblem["field"], path: string | undefined): Result.Result<string | undefined, RedisFileProblem> => {
  if (path === undefined) return Result.succeed(undefined)
  try {
    const text = readFileSync(path, "utf8")
    if (field !== "passwordFile" && !text.includes("-----BEGIN ")) {
      return Result.fail({ field, message: `expected a PEM file, got ${JSON.stringify(path)} without a "-----BEGIN" line` })
    }
    return Result.succeed(text)
  } catch (error) {
    return Result.fail({ field, message: `cannot read ${JSON.stringify(path)} (${error instanceof Error ? error.message : String(error)})` })
  }
}

/** The password file's one line: a trailing line break (as `echo` and editors write) is not part of it. */
const passwordIn = (text: string): Result.Result<Redacted.Redacted<string>, RedisFileProblem> => {
  const password = text.replace(/\r?\n$/, "")
  return password === "" ? Result.fail({ field: "passwordFile", message: "expected a file holding the password, got an empty one" }) : Result.succeed(Redacted.make(password))
}

export const readRedisFiles = (settings: RedisSettings): Result.Result<RedisFileContents, RedisFileProblem> =>
  Result.gen(function* () {
    const passwordText = yield* read("passwordFile", settings.passwordFile)
    const password = passwordText === undefined ? settings.password : yield* passwordIn(passwordText)
    return {
      password,
      ca: yield* read("tlsCa", settings.tlsCa),
      cert: yield* read("tlsCert", settings.tlsCert),
      key: yield* read("tlsKey", settings.tlsKey)
    }
  })
