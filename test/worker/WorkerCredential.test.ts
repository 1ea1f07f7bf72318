// Who the worker is to the registry (docs/worker.md "Credentials"): the deployment token as
// before, or a worker credential given as a string, a function, or a file read again on every
// registry call (a Kubernetes projected service-account token is rewritten in place); exactly
// one of them. Every registry call carries it as `Authorization: Bearer`. A refusal (401, 403)
// is logged with Pinboard's error text, and a refused registration is retried on the clock's
// schedule like any failure, never in a loop of its own.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { TestClock } from "effect/testing"
import { defineInstance } from "../../src/worker/Definition.js"
import { httpRegistryClient, RegistryCallFailed, RegistryCallRefused, type HttpRegistryOptions } from "../../src/worker/RegistryClient.js"
import { makeWorker, type WorkerOptions } from "../../src/worker/Worker.js"
import type { LogLine } from "../../src/worker/WorkerLog.js"
import { registryStandIn, type RegistryStandIn } from "../support/RegistryStandIn.js"
import { ed25519Key } from "../support/TestAttestations.js"
import { quietWindow } from "../support/Time.js"
import { flush, until } from "../support/Turns.js"

const LEASE_MS = 3000
const status = { headroom: 1, draining: false }
const placement = { env: "", namespace: "/counters", id: "c1" }

const clientOf = (standIn: RegistryStandIn, credential: Pick<HttpRegistryOptions, "token" | "credential" | "credentialFile">) =>
  httpRegistryClient({ pinboard: standIn.url, worker: "w1", advertiseUrl: "http://127.0.0.1:9", namespaces: ["/counters"], ...credential })

/** Every registry call the worker makes, once. */
const everyCall = (client: ReturnType<typeof httpRegistryClient>) =>
  Effect.promise(async () => {
    await client.keys!()
    await client.register(status)
    await client.heartbeat("inc-1", status)
    await client.release(placement, "5")
    await client.deregister("inc-1")
  })

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "pinboard-credential-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const counter = defineInstance({ activate: () => ({}) })
const baseOptions = (standIn: RegistryStandIn, log: Array<LogLine>): WorkerOptions => ({
  pinboard: standIn.url,
  worker: "w1",
  instances: { "/counters": counter },
  log: (line) => void log.push(line)
})

describe("the registry client's credential", () => {
  it.effect("the deployment token, as before: every call carries it", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      yield* everyCall(clientOf(standIn, { token: "deployment-token" }))
      expect(standIn.seen.map((r) => `${r.method} ${r.path} ${r.authorization}`)).toEqual([
        "GET /registry/keys Bearer deployment-token",
        "POST /registry/workers Bearer deployment-token",
        "POST /registry/workers/w1/heartbeat Bearer deployment-token",
        "POST /registry/release Bearer deployment-token",
        "DELETE /registry/workers/w1 Bearer deployment-token"
      ])
    })
  )

  it.effect("a string credential: every call carries it", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      yield* everyCall(clientOf(standIn, { credential: "worker-key" }))
      expect(standIn.seen.map((r) => r.authorization)).toEqual(Array(5).fill("Bearer worker-key"))
    })
  )

  it.effect("a function: each call carries what it gives then (it may be async)", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      let n = 0
      yield* everyCall(clientOf(standIn, { credential: async () => `jwt-${++n}` }))
      expect(standIn.seen.map((r) => r.authorization)).toEqual(["Bearer jwt-1", "Bearer jwt-2", "Bearer jwt-3", "Bearer jwt-4", "Bearer jwt-5"])
    })
  )

  it.effect("a file: read again on every call, so a token rewritten in place is sent from the next call on", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      const file = join(yield* tempDir, "token")
      writeFileSync(file, "projected-jwt-1\n")
      const client = clientOf(standIn, { credentialFile: file })
      yield* Effect.promise(() => client.heartbeat("inc-1", status))
      writeFileSync(file, "projected-jwt-2")
      yield* Effect.promise(() => client.heartbeat("inc-1", status))
      expect(standIn.seen.map((r) => r.authorization)).toEqual(["Bearer projected-jwt-1", "Bearer projected-jwt-2"])
      // A file that cannot be read fails the call (the lease keeper retries it), naming the file.
      rmSync(file)
      const failed = yield* Effect.promise(() => client.heartbeat("inc-1", status).catch((error: unknown) => error))
      expect(failed).toBeInstanceOf(RegistryCallFailed)
      expect((failed as Error).message).toContain(`heartbeat: credential file ${file}:`)
      writeFileSync(file, " \n")
      expect(String(yield* Effect.promise(() => client.heartbeat("inc-1", status).catch((error: Error) => error.message)))).toBe(
        `heartbeat: credential file ${file} is empty`
      )
      expect(standIn.seen).toHaveLength(2)
    })
  )

  it.effect("a refusal (401, 403) is a RegistryCallRefused carrying Pinboard's error text", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      standIn.state.registerRefusal = "credential does not cover worker"
      const refused = yield* Effect.promise(() => clientOf(standIn, { credential: "k" }).register(status).catch((error: unknown) => error))
      expect(refused).toBeInstanceOf(RegistryCallRefused)
      expect(refused).toMatchObject({ _tag: "RegistryCallRefused", status: 403, error: "credential does not cover worker" })
      expect((refused as Error).message).toBe("register: 403 credential does not cover worker")
    })
  )
})

describe("the worker's credential options", () => {
  it.effect("exactly one of token, credential and credentialFile, else the worker does not start", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      const log: Array<LogLine> = []
      const failure = (credential: Partial<WorkerOptions>) =>
        Effect.map(Effect.exit(makeWorker({ ...baseOptions(standIn, log), ...credential })), (exit) =>
          Exit.isFailure(exit) ? String(exit.cause) : "started"
        )
      expect(yield* failure({})).toContain("the worker takes exactly one of token, credential and credentialFile; got none")
      expect(yield* failure({ token: "t", credential: "k" })).toContain(
        "the worker takes exactly one of token, credential and credentialFile; got token and credential"
      )
      expect(yield* failure({ credential: "k", credentialFile: "/f" })).toContain("got credential and credentialFile")
      expect(standIn.seen).toEqual([])
    })
  )

  it.effect("a worker on a credential file sends what the file holds at each call: keys, register, heartbeats", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      standIn.state.keys = [(yield* Effect.promise(ed25519Key)).publicJwk]
      const file = join(yield* tempDir, "token")
      writeFileSync(file, "jwt-1")
      const worker = yield* makeWorker({ ...baseOptions(standIn, []), credentialFile: file })
      yield* worker.registered
      writeFileSync(file, "jwt-2")
      yield* TestClock.adjust(LEASE_MS / 3)
      yield* until(() => standIn.count("POST", "/registry/workers/w1/heartbeat") === 1, "the first heartbeat")
      expect(standIn.seen.map((r) => `${r.method} ${r.path} ${r.authorization}`)).toEqual([
        "GET /registry/keys Bearer jwt-1",
        "POST /registry/workers Bearer jwt-1",
        "POST /registry/workers/w1/heartbeat Bearer jwt-2"
      ])
    })
  )

  it.effect("a refused registration is logged with Pinboard's error text and retried on the clock, not in a loop", () =>
    Effect.gen(function* () {
      const standIn = yield* registryStandIn(LEASE_MS)
      standIn.state.registerRefusal = "credential does not cover worker"
      const log: Array<LogLine> = []
      yield* makeWorker({ ...baseOptions(standIn, log), token: "t" })
      const registers = () => standIn.count("POST", "/registry/workers")
      yield* until(() => log.some((line) => line.message === "register refused, retrying"), "the refusal's log line")
      const line = log.find((l) => l.message === "register refused, retrying")!
      expect(line).toMatchObject({ level: "error", worker: "w1", cause: "register: 403 credential does not cover worker" })
      // The clock stands still: real time passes, and no second attempt is made.
      yield* Effect.promise(() => quietWindow(200))
      expect(registers()).toBe(1)
      // Its retry schedule (docs/worker.md "The lease"): the next attempt 100 ms on.
      yield* TestClock.adjust(99)
      yield* flush
      expect(registers()).toBe(1)
      yield* TestClock.adjust(1)
      yield* until(() => registers() === 2, "the second attempt")
      standIn.state.registerRefusal = undefined
      yield* TestClock.adjust(200)
      yield* until(() => log.some((l) => l.message === "worker registered"), "the registration once the credential covers the worker")
    })
  )
})
