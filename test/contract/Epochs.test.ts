// Epoch form and order (docs/registry-api.md "Conventions", docs/worker.md "Durable state: fencing
// by epoch"): decimal strings of at most 40 digits, compared as numbers without ever becoming
// numbers; and the one form checked alike by the registry API and the caller-token check.
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Result, Schema } from "effect"
import { SignJWT } from "jose"
import { verifyCallerToken } from "../../src/auth/CallerToken.js"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import { compareEpochs, isEpoch, MAX_EPOCH_DIGITS } from "../../src/contract/Epochs.js"
import { Epoch } from "../../src/http/RegistryBodies.js"
import * as fc from "../support/Arbitraries.js"

const EPOCH_PATTERN = /^(0|[1-9][0-9]{0,39})$/
const sign = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0)

/** Small values (many equal lengths and ties) mixed with values far beyond 2^64, up to 40 digits. */
const epochArb = fc.oneof(fc.bigInt({ min: 0n, max: 1000n }), fc.bigInt({ min: 0n, max: 10n ** 40n - 1n }))
const badEpochArb = fc.oneof(
  fc.constantFrom("", "01", "00", "007", "-1", "+1", "1.0", "1e3", " 1", "1 ", "1\n", "0x1", "１", "NaN", "1" + "0".repeat(40)),
  fc.string({ maxLength: 30, unit: "binary" }).pipe(Arbitrary.filter((s) => !EPOCH_PATTERN.test(s)))
)

describe("compareEpochs", () => {
  it("orders by magnitude, not by text", () => {
    expect(compareEpochs("0", "0")).toBe(0)
    expect(compareEpochs("0", "1")).toBe(-1)
    expect(compareEpochs("9", "10")).toBe(-1)
    expect(compareEpochs("10", "9")).toBe(1)
    expect(compareEpochs("17", "17")).toBe(0)
    expect(compareEpochs("100", "99")).toBe(1)
    expect(compareEpochs("18446744073709551615", "18446744073709551617")).toBe(-1)
    expect(compareEpochs("18446744073709551617", "9007199254740993")).toBe(1)
    expect(compareEpochs("9007199254740993", "9007199254740992")).toBe(1)
  })

  it("throws a TypeError naming the bad value, in either position", () => {
    expect(() => compareEpochs("01", "1")).toThrow(TypeError)
    expect(() => compareEpochs("01", "1")).toThrow(`"01"`)
    expect(() => compareEpochs("1", "-1")).toThrow(`"-1"`)
    expect(() => compareEpochs("", "0")).toThrow(`""`)
    expect(() => compareEpochs(7 as unknown as string, "0")).toThrow(/invalid epoch 7/)
    // Not a string: named as String() shows it, not as JSON.
    expect(() => compareEpochs("0", {} as unknown as string)).toThrow("invalid epoch [object Object]: expected a decimal string without leading zeros, at most 40 digits")
  })

  it.prop("agrees with BigInt order", [epochArb, epochArb], ([a, b]) => {
    expect(compareEpochs(String(a), String(b))).toBe(sign(a, b))
  })

  it.prop("is antisymmetric and reflexive", [epochArb, epochArb], ([a, b]) => {
    expect(compareEpochs(String(a), String(b))).toBe(-compareEpochs(String(b), String(a)) || 0)
    expect(compareEpochs(String(a), String(a))).toBe(0)
  })

  it.prop("sorts like BigInt (a total order)", [fc.array(epochArb, { maxLength: 30 })], ([values]) => {
    const byEpoch = values.map(String).sort(compareEpochs)
    const byBigInt = [...values].sort(sign).map(String)
    expect(byEpoch).toStrictEqual(byBigInt)
  })

  it.prop("rejects anything that is not an epoch", [badEpochArb, epochArb], ([bad, good]) => {
    expect(() => compareEpochs(bad, String(good))).toThrow(TypeError)
    expect(() => compareEpochs(String(good), bad)).toThrow(TypeError)
    expect(() => compareEpochs(bad, String(good))).toThrow(JSON.stringify(bad))
  })
})

describe("isEpoch", () => {
  it("accepts canonical decimal strings only", () => {
    for (const good of ["0", "1", "17", "18446744073709551617", "9".repeat(MAX_EPOCH_DIGITS)]) expect(isEpoch(good)).toBe(true)
    for (const bad of ["", "01", "007", "-1", "1.5", " 1", "1\n", "abc", "1" + "0".repeat(MAX_EPOCH_DIGITS)]) expect(isEpoch(bad)).toBe(false)
    expect(isEpoch(17 as unknown as string)).toBe(false)
  })

  it.prop("accepts every non-negative integer's decimal form", [epochArb], ([n]) => {
    expect(isEpoch(String(n))).toBe(true)
  })

  it.prop("agrees with the pattern on any string", [fc.oneof(badEpochArb, epochArb.pipe(Arbitrary.map(String)))], ([s]) => {
    expect(isEpoch(s)).toBe(EPOCH_PATTERN.test(s))
  })
})

describe("one epoch form, wherever an epoch is checked", () => {
  const KEY = attestationKey("deployment-token")
  const NOW_S = 1_800_000_000
  const callerTokenAccepts = async (epoch: string) => {
    const token = await new SignJWT({ iss: "w1", aud: "pinboard", sub: "/threads/t1", epoch, depth: 0, iat: NOW_S, exp: NOW_S + 60 })
      .setProtectedHeader({ alg: "HS256" })
      .sign(KEY)
    return typeof (await verifyCallerToken(token, KEY, NOW_S * 1000)) === "object"
  }
  const registryBodyAccepts = (epoch: string) => Result.isSuccess(Schema.decodeUnknownResult(Epoch)(epoch))
  const cases = ["0", "7", "17", "1764452669741000001", "9".repeat(40), "", "00", "01", "007", "-1", "+1", "1.0", "1e3", " 1", "1\n", "1" + "0".repeat(40)]

  it.each(cases)("%j: the registry API, the caller-token check and isEpoch agree", async (epoch) => {
    const expected = isEpoch(epoch)
    expect(registryBodyAccepts(epoch)).toBe(expected)
    expect(await callerTokenAccepts(epoch)).toBe(expected)
  })

  it("leading zeros are refused by all three", async () => {
    expect(isEpoch("007")).toBe(false)
    expect(registryBodyAccepts("007")).toBe(false)
    expect(await callerTokenAccepts("007")).toBe(false)
  })
})
