import { it } from "vitest"
import { Arbitrary, Effect } from "effect"
import * as fc from "../support/Arbitraries.js"
const show = <A>(name: string, a: Arbitrary.Arbitrary<A>) => console.log(name, JSON.stringify(Effect.runSync(Arbitrary.sampleEffect(a, { count: 12, seed: 1 }))))
it("scratch", () => {
show("constantFrom", fc.constantFrom("a", "b", "c"))
show("oneof", fc.oneof(fc.constant("x"), fc.string({ maxLength: 3 })))
show("binary", fc.string({ unit: "binary", maxLength: 5 }))
show("string", fc.string())
show("string1", fc.string({ minLength: 1, maxLength: 1, unit: "binary" }))
show("bigInt", Arbitrary.map(fc.bigInt({ min: 0n, max: 10n ** 40n - 1n }), String))
show("array", fc.array(fc.constantFrom(1, 2, 3), { maxLength: 6 }))
})
