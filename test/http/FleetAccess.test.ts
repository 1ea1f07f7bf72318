// Who may read `/fleet.json` (docs/operations.md "An operator key"): with `credentials`, an
// operator credential alone (401 for none or an unknown one, 403 for a worker's); without,
// anyone, whatever the header says.
import { createHash } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted, Result } from "effect"
import { makeCredentials } from "../../src/auth/Credentials.js"
import { loadCredentialSet } from "../../src/config/CredentialSet.js"
import { fleetAccess } from "../../src/http/FleetAccess.js"
import { configForTests } from "../support/TestConfig.js"

const sha256 = (key: string) => createHash("sha256").update(key).digest("hex")

const SET = {
  operators: [{ name: "oncall", sha256: sha256("operator-key") }],
  workers: [{ name: "chat", sha256: sha256("chat-key"), workers: ["chat-*"], namespaces: ["/threads"] }]
}

const credentialsOf = () => {
  const config = { ...configForTests({ token: Redacted.make("deployment-token") }), attestation: { keys: ["attestation.pem"] }, credentials: SET }
  const loaded = loadCredentialSet({ _tag: "Inline", value: SET }, config)
  if (Result.isFailure(loaded)) throw new Error(loaded.failure)
  return makeCredentials(config, loaded.success)
}

const outcome = (configured: boolean, authorization: string | undefined) =>
  Effect.map(Effect.result(fleetAccess(configured, credentialsOf())(authorization)), (result) =>
    Result.isSuccess(result) ? "admitted" : result.failure._tag
  )

describe("fleetAccess", () => {
  it.effect("with credentials: operator credentials only", () =>
    Effect.gen(function* () {
      expect(yield* outcome(true, "Bearer operator-key")).toBe("admitted")
      expect(yield* outcome(true, "Bearer deployment-token")).toBe("admitted")
      expect(yield* outcome(true, "Bearer chat-key")).toBe("OperatorCredentialRequired")
      expect(yield* outcome(true, "Bearer someone-else")).toBe("InvalidDeploymentToken")
      expect(yield* outcome(true, undefined)).toBe("InvalidDeploymentToken")
    }))

  it.effect("without credentials: open, as before", () =>
    Effect.gen(function* () {
      expect(yield* outcome(false, undefined)).toBe("admitted")
      expect(yield* outcome(false, "Bearer someone-else")).toBe("admitted")
    }))
})
