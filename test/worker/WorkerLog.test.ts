// The worker library's log lines (docs/worker.md "Logs"): the JSON lines Pinboard writes
// (time, level, message first, then the fields), each naming the worker; a line at start
// (listening, registered) and at stop (draining, deregistered, stopped); the lease's
// warnings; failures with their cause. The assembled worker on TestClock, with a registry the test plays.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { TestClock } from "effect/testing"
import { vi } from "vitest"
import { makeAttestationSigner } from "../../src/auth/Attestation.js"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import type { LogLine } from "../../src/serving/LogLine.js"
import { defineInstance } from "../../src/worker/Definition.js"
import type { RegistryClient } from "../../src/worker/RegistryClient.js"
import { makeWorker, type WorkerOptions } from "../../src/worker/Worker.js"
import { flush, until } from "../support/Turns.js"

const TOKEN = "log-test-token"
const T = 1_800_000_000_000
const TIME = "2027-01-15T08:00:00.000Z"

/** How the played registry answers heartbeats; `registerFailures` registrations fail first. */
const heartbeats = { answer: "renewed" as "renewed" | "unreachable" | "lost" }

const registry = (registerFailures: number): RegistryClient => {
  let failures = registerFailures
  let incarnations = 0
  return {
    register: async () => {
      if (failures-- > 0) throw new Error("connection refused")
      return { incarnation: `inc-${++incarnations}`, leaseMs: 3000, heartbeatMs: 1000, unrenewed: [] }
    },
    heartbeat: async () => {
      if (heartbeats.answer === "unreachable") throw new Error("connection refused")
      return heartbeats.answer === "lost" ? { _tag: "LeaseLost" } : { _tag: "Renewed", windDown: [], unrenewed: [] }
    },
    release: async () => true,
    deregister: async () => {}
  }
}

const failing = defineInstance({
  activate: () => ({}),
  routes: {
    "GET /boom": () => {
      throw new Error("boom")
    }
  }
})

const options = (lines: Array<LogLine> | undefined, registerFailures = 0): WorkerOptions => ({
  pinboard: "http://127.0.0.1:1",
  token: TOKEN,
  worker: "w1",
  instances: { "/things": failing },
  registry: registry(registerFailures),
  ...(lines === undefined ? {} : { log: (line: LogLine) => void lines.push(line) })
})

const messages = (lines: ReadonlyArray<LogLine>) => lines.map((line) => `${line.level} ${line.message}`)

describe("the worker's log lines", () => {
  it.effect("start and stop: listening, registered, draining, deregistered, stopped; each a Pinboard line naming the worker", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const lines: Array<LogLine> = []
      const scope = yield* Scope.make()
      const worker = yield* Scope.provide(makeWorker(options(lines)), scope)
      yield* until(() => lines.some((line) => line.message === "worker registered"), "the registration's line")
      yield* Scope.close(scope, Exit.void)
      expect(messages(lines)).toEqual([
        `info worker listening on http://127.0.0.1:${worker.port}`,
        "info worker registered",
        "info worker draining",
        "info worker deregistered",
        "info worker stopped"
      ])
      expect(lines[0]).toEqual({ time: TIME, level: "info", message: `worker listening on http://127.0.0.1:${worker.port}`, worker: "w1", advertise_url: worker.url })
      expect(lines[1]).toEqual({ time: TIME, level: "info", message: "worker registered", worker: "w1", incarnation: "inc-1", lease_ms: 3000 })
      expect(lines[2]).toEqual({ time: TIME, level: "info", message: "worker draining", worker: "w1", grace_ms: 10_000 })
      expect(lines[3]).toEqual({ time: TIME, level: "info", message: "worker deregistered", worker: "w1", incarnation: "inc-1" })
      for (const line of lines) expect(Object.keys(line).slice(0, 3)).toEqual(["time", "level", "message"])
    })
  )

  it.effect("a failed registration is a warning with its cause; a handler's failure an error with the stack", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const lines: Array<LogLine> = []
      const worker = yield* makeWorker(options(lines, 1))
      yield* until(() => lines.some((line) => line.message === "register failed, retrying"), "the failure's line")
      expect(lines.find((line) => line.message === "register failed, retrying")).toEqual({
        time: TIME,
        level: "warning",
        message: "register failed, retrying",
        worker: "w1",
        cause: "register: connection refused"
      })
      yield* TestClock.adjust(100)
      yield* until(worker.healthy, "a healthy lease")
      const attestation = makeAttestationSigner({ alg: "HS256", secret: attestationKey(TOKEN) })(
        { worker: "w1", namespace: "/things", id: "t1", epoch: "3", depth: 0, principal: undefined, caller: undefined },
        T + 100
      )
      const status = yield* Effect.promise(() => fetch(`${worker.url}/things/t1/boom`, { headers: { "pinboard-attestation": attestation } }).then((res) => res.status))
      expect(status).toBe(500)
      const failed = lines.find((line) => line.level === "error")!
      expect(failed).toMatchObject({ level: "error", message: "GET /things/t1/boom: handler failed", worker: "w1" })
      expect(failed["cause"]).toMatch(/^Error: boom\n\s+at /)
    })
  )

  it.effect("the lease: unhealthy is a warning naming the buckets; lost, a warning, then registered again", () =>
    Effect.gen(function* () {
      heartbeats.answer = "renewed"
      yield* Effect.addFinalizer(() => Effect.sync(() => (heartbeats.answer = "renewed")))
      const lines: Array<LogLine> = []
      const worker = yield* makeWorker(options(lines))
      yield* until(worker.healthy, "a healthy lease")
      heartbeats.answer = "unreachable"
      // The lease (3 s) less its margin (a fifth) after the registration.
      yield* TestClock.adjust(2400)
      yield* until(() => lines.some((line) => line.message === "lease unhealthy: activations dropped"), "the unhealthy lease's line")
      expect(lines.find((line) => line.message === "lease unhealthy: activations dropped")).toMatchObject({ level: "warning", worker: "w1", buckets: "all" })
      expect(lines.filter((line) => line.message === "heartbeat failed, retrying")[0]).toMatchObject({ level: "warning", cause: "heartbeat: connection refused" })
      heartbeats.answer = "lost"
      // The heartbeat's retries wait on the Clock (up to 2 s apart): step it until one gets the 410.
      const registeredAgain = () => lines.filter((line) => line.message === "worker registered").length === 2
      for (let step = 0; step < 20 && !registeredAgain(); step++) yield* Effect.andThen(TestClock.adjust(500), flush)
      yield* until(registeredAgain, "the second registration's line")
      expect(lines.find((line) => line.message === "lease lost, registering again")).toMatchObject({ level: "warning", worker: "w1", incarnation: "inc-1" })
      expect(lines.filter((line) => line.message === "worker registered").map((line) => line["incarnation"])).toEqual(["inc-1", "inc-2"])
    })
  )

  it.effect("without `log`, the lines go to stdout, one JSON object each", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const written: Array<string> = []
      const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
        written.push(String(chunk))
        return true
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => spy.mockRestore()))
      const worker = yield* makeWorker(options(undefined))
      yield* until(() => written.some((text) => text.includes('"worker registered"')), "the registration's line")
      // Annotations come in no particular order after the first three fields.
      const head = `{"time":"${TIME}","level":"info","message":"worker `
      expect(written.slice(0, 2).map((text) => [text.startsWith(head) && text.endsWith("}\n"), JSON.parse(text)])).toEqual([
        [true, { time: TIME, level: "info", message: `worker listening on http://127.0.0.1:${worker.port}`, worker: "w1", advertise_url: worker.url }],
        [true, { time: TIME, level: "info", message: "worker registered", worker: "w1", incarnation: "inc-1", lease_ms: 3000 }]
      ])
    })
  )
})
