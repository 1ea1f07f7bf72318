// The catalogue's parts that docs/errors.md does not show (test/docs/ErrorsDoc.test.ts holds
// the replies): Retry-After rounding and the access log's reason of a client that left.
import { describe, expect, it } from "@effect/vitest"
import { ClientAborted, retryAfterSeconds } from "../src/Errors.js"

describe("the catalogue", () => {
  it("Retry-After is the wait in whole seconds, rounded up, at least 1", () => {
    expect(retryAfterSeconds(0)).toBe(1)
    expect(retryAfterSeconds(1)).toBe(1)
    expect(retryAfterSeconds(1_000)).toBe(1)
    expect(retryAfterSeconds(1_001)).toBe(2)
    expect(retryAfterSeconds(14_999)).toBe(15)
  })

  it("a client that went away before the forward: 502 with no body, logged with its reason (docs/operations.md)", () => {
    const aborted = new ClientAborted()
    expect(aborted.reply).toEqual({ status: 502, body: "" })
    expect(aborted.reason).toBe("client closed before the forward")
  })
})
