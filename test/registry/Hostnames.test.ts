// Hostname-aware mode's pure decisions (docs/proxy.md "Hostname-aware mode", docs/protocol.md "Resolution" steps 2, 3, 5;
// docs/proxy.md "Hostname-aware mode"): bindings set, kept, moved or refused by registrations;
// placements held through another hostname; displacement; candidates per hostname.
import { describe, expect, it } from "@effect/vitest"
import type { NamespaceRegistration } from "../../src/registry/Domain.js"
import {
  bindingKey,
  decideBindings,
  decideHeld,
  displacementLeftMs,
  servesHostname,
  type Binding
} from "../../src/registry/Hostnames.js"
import * as Gen from "../support/Arbitraries.js"

const LEASE = 15_000
const NOW = 1_800_000_000_000
const entry = (hostname: string, env: string, namespace = "/docs"): NamespaceRegistration => ({ namespace, hostname, env })
const bound = (env: string, epoch: string, displacedUntil = 0): Binding => ({ env, epoch, displacedUntil })
const bindingsOf = (pairs: ReadonlyArray<readonly [string, Binding]>) => new Map(pairs)

describe("bindings a registration sets (docs/proxy.md 'Hostname-aware mode')", () => {
  it("the first registration of a pair binds it to its env, at its epoch, with no wait", () => {
    expect(decideBindings(new Map(), [entry("a.example", "prod")], "0", NOW, LEASE)).toEqual({
      _tag: "Bind",
      updates: new Map([[bindingKey("a.example", "/docs"), bound("prod", "0")]])
    })
  })

  it("naming the bound env is accepted whatever its epoch; a higher epoch is kept, the wait too", () => {
    const bindings = bindingsOf([[bindingKey("a.example", "/docs"), bound("prod", "7", NOW + 5)]])
    expect(decideBindings(bindings, [entry("a.example", "prod")], "3", NOW, LEASE)).toEqual({ _tag: "Bind", updates: new Map() })
    expect(decideBindings(bindings, [entry("a.example", "prod")], "7", NOW, LEASE)).toEqual({ _tag: "Bind", updates: new Map() })
    expect(decideBindings(bindings, [entry("a.example", "prod")], "12", NOW, LEASE)).toEqual({
      _tag: "Bind",
      updates: new Map([[bindingKey("a.example", "/docs"), bound("prod", "12", NOW + 5)]])
    })
  })

  it("another env with a higher epoch rebinds the pair, and its new ids wait one lease", () => {
    const bindings = bindingsOf([[bindingKey("a.example", "/docs"), bound("prod", "7")]])
    expect(decideBindings(bindings, [entry("a.example", "staging")], "8", NOW, LEASE)).toEqual({
      _tag: "Bind",
      updates: new Map([[bindingKey("a.example", "/docs"), bound("staging", "8", NOW + LEASE)]])
    })
  })

  it("another env without a higher epoch refuses the whole registration (409), naming the pair", () => {
    const bindings = bindingsOf([[bindingKey("a.example", "/docs"), bound("prod", "7")]])
    for (const epoch of ["7", "6", "0"]) {
      expect(decideBindings(bindings, [entry("b.example", "prod"), entry("a.example", "staging")], epoch, NOW, LEASE)).toEqual({
        _tag: "Conflict",
        hostname: "a.example",
        namespace: "/docs"
      })
    }
  })

  it("epochs compare as integers, past 2^53 and by length", () => {
    const bindings = bindingsOf([[bindingKey("a.example", "/docs"), bound("prod", "9007199254740993")]])
    expect(decideBindings(bindings, [entry("a.example", "dev")], "9007199254740992", NOW, LEASE)._tag).toBe("Conflict")
    expect(decideBindings(bindings, [entry("a.example", "dev")], "9007199254740994", NOW, LEASE)._tag).toBe("Bind")
    expect(decideBindings(bindingsOf([[bindingKey("a.example", "/docs"), bound("prod", "9")]]), [entry("a.example", "dev")], "10", NOW, LEASE)._tag).toBe("Bind")
  })

  it("one registration naming two envs for one pair is refused; pairs are per hostname and namespace", () => {
    expect(decideBindings(new Map(), [entry("a.example", "prod"), entry("a.example", "dev")], "5", NOW, LEASE)._tag).toBe("Conflict")
    const decision = decideBindings(new Map(), [entry("a.example", "prod"), entry("b.example", "dev"), entry("a.example", "dev", "/chat")], "1", NOW, LEASE)
    expect(decision._tag === "Bind" && [...decision.updates.keys()].sort()).toEqual([
      bindingKey("a.example", "/chat"),
      bindingKey("a.example", "/docs"),
      bindingKey("b.example", "/docs")
    ])
  })

  it("outside hostname-aware mode (no hostname) nothing is bound", () => {
    expect(decideBindings(new Map(), [entry("", "")], "0", NOW, LEASE)).toEqual({ _tag: "Bind", updates: new Map() })
  })

  const registration = Gen.record({
    hostname: Gen.constantFrom("a.example", "b.example"),
    env: Gen.constantFrom("prod", "dev", "staging"),
    epoch: Gen.map(Gen.bigInt({ min: 0n, max: 20n }), String),
    at: Gen.integer({ min: 0, max: 100_000 })
  })
  it.prop(
    "over any sequence of registrations, a pair changes env only at a strictly higher epoch, and then waits one lease",
    [Gen.array(registration, { maxLength: 40 })],
    ([registrations]) => {
      const bindings = new Map<string, Binding>()
      for (const r of registrations) {
        const before = bindings.get(bindingKey(r.hostname, "/docs"))
        const decision = decideBindings(bindings, [entry(r.hostname, r.env)], r.epoch, r.at, LEASE)
        if (decision._tag === "Conflict") {
          expect(before !== undefined && before.env !== r.env && BigInt(r.epoch) <= BigInt(before.epoch)).toBe(true)
          continue
        }
        for (const [key, after] of decision.updates) bindings.set(key, after)
        const after = bindings.get(bindingKey(r.hostname, "/docs"))!
        expect(after.env).toBe(r.env)
        if (before !== undefined && before.env !== after.env) {
          expect(BigInt(after.epoch) > BigInt(before.epoch)).toBe(true)
          expect(after.displacedUntil).toBe(r.at + LEASE)
        }
        if (before !== undefined) expect(BigInt(after.epoch) >= BigInt(before.epoch)).toBe(true)
      }
    }
  )
})

describe("a live placement and the request's hostname (docs/protocol.md 'Resolution' step 2)", () => {
  const row = (windDownAt = 0) => ({ windDownAt })

  it("through a hostname its owner is registered for: forwarded, during a wind-down too", () => {
    expect(decideHeld(row(), true, "deny", NOW, LEASE)).toEqual({ _tag: "Forward" })
    expect(decideHeld(row(NOW + 10), true, "wind_down", NOW, LEASE)).toEqual({ _tag: "Forward" })
  })

  it("through another hostname, takeover deny: 503 placement held by another hostname", () => {
    expect(decideHeld(row(), false, "deny", NOW, LEASE)).toEqual({ _tag: "Deny" })
  })

  it("through another hostname, takeover wind_down: a deadline one lease away, kept once set", () => {
    expect(decideHeld(row(), false, "wind_down", NOW, LEASE)).toEqual({ _tag: "WindingDown", deadline: NOW + LEASE })
    expect(decideHeld(row(NOW + 400), false, "wind_down", NOW + 100, LEASE)).toEqual({ _tag: "WindingDown", deadline: NOW + 400 })
  })
})

describe("displacement and candidates (docs/protocol.md 'Resolution' steps 3 and 5)", () => {
  it("new ids of a rebound pair wait until one lease after the rebinding", () => {
    expect(displacementLeftMs(bound("dev", "8", NOW + LEASE), NOW)).toBe(LEASE)
    expect(displacementLeftMs(bound("dev", "8", NOW + LEASE), NOW + LEASE)).toBe(0)
    expect(displacementLeftMs(bound("dev", "8"), NOW)).toBe(0)
  })

  it("a worker is a candidate only for the env, namespace and hostname it registered", () => {
    const registered = [entry("a.example", "prod"), entry("b.example", "prod", "/chat")]
    expect(servesHostname(registered, "prod", "/docs", "a.example")).toBe(true)
    expect(servesHostname(registered, "prod", "/docs", "b.example")).toBe(false)
    expect(servesHostname(registered, "dev", "/docs", "a.example")).toBe(false)
    expect(servesHostname(registered, "prod", "/chat", "b.example")).toBe(true)
  })
})
