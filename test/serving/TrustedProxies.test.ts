// The client's address behind balancers (docs/deploy.md "Behind a load balancer"): the trusted
// list and the right-most-untrusted rule of X-Forwarded-For.
import { describe, expect, it } from "vitest"
import { clientAddress, isAddressOrRange, trustedProxiesOf } from "../../src/serving/TrustedProxies.js"
import * as fc from "../support/Arbitraries.js"

const balancers = trustedProxiesOf(["10.0.0.0/8", "127.0.0.1", "fd00::/8", "::1"])

describe("trusted proxies", () => {
  it("takes addresses and CIDR ranges, IPv4 and IPv6, and nothing else", () => {
    for (const entry of ["10.0.0.9", "10.0.0.0/8", "0.0.0.0/0", "::1", "fd00::/8", "::/0", "2001:db8::/128", "::ffff:10.0.0.9"]) {
      expect(isAddressOrRange(entry), entry).toBe(true)
    }
    for (const entry of ["", "10.0.0", "10.0.0.0/33", "::1/129", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/8/8", "example.com", "10.0.0.0/08x", "10.0.0.0/1000"]) {
      expect(isAddressOrRange(entry), entry).toBe(false)
    }
  })

  it("trusts the addresses in its ranges, of either family, and an IPv4-mapped peer as its IPv4 address", () => {
    expect(balancers.trusts("10.1.2.3")).toBe(true)
    expect(balancers.trusts("127.0.0.1")).toBe(true)
    expect(balancers.trusts("127.0.0.2")).toBe(false)
    expect(balancers.trusts("fd12::1")).toBe(true)
    expect(balancers.trusts("::1")).toBe(true)
    expect(balancers.trusts("2001:db8::1")).toBe(false)
    expect(balancers.trusts("11.0.0.1")).toBe(false)
    expect(balancers.trusts("not an address")).toBe(false)
    expect(trustedProxiesOf(["::ffff:10.0.0.0/104"]).trusts("10.9.9.9")).toBe(false)
  })
})

describe("the client's address", () => {
  it("is the peer when nobody is trusted, whatever X-Forwarded-For says", () => {
    const none = trustedProxiesOf([])
    expect(none.none).toBe(true)
    expect(clientAddress("10.0.0.5", "203.0.113.7", none)).toBe("10.0.0.5")
  })

  it("is the peer when the peer is not trusted", () => {
    expect(clientAddress("198.51.100.4", "203.0.113.7", balancers)).toBe("198.51.100.4")
  })

  it("is the peer when a trusted peer sends no X-Forwarded-For", () => {
    expect(clientAddress("10.0.0.5", undefined, balancers)).toBe("10.0.0.5")
  })

  it("is the right-most entry that is not trusted", () => {
    expect(clientAddress("10.0.0.5", "203.0.113.7", balancers)).toBe("203.0.113.7")
    // A spoofed left part is never reached: the client's own proxy wrote the untrusted entry.
    expect(clientAddress("10.0.0.5", "1.2.3.4, 203.0.113.7, 10.0.0.3", balancers)).toBe("203.0.113.7")
    expect(clientAddress("10.0.0.5", "2001:db8::7, fd00::3", balancers)).toBe("2001:db8::7")
  })

  it("is the left-most entry when the whole chain is trusted", () => {
    expect(clientAddress("10.0.0.5", "10.0.0.1, 10.0.0.2", balancers)).toBe("10.0.0.1")
  })

  it("reads repeated fields as one list, ports and brackets off, IPv4-mapped as IPv4", () => {
    expect(clientAddress("10.0.0.5", ["1.2.3.4", "203.0.113.7:5123"], balancers)).toBe("203.0.113.7")
    expect(clientAddress("10.0.0.5", "[2001:db8::7]:443", balancers)).toBe("2001:db8::7")
    expect(clientAddress("10.0.0.5", "::ffff:203.0.113.7", balancers)).toBe("203.0.113.7")
  })

  it("stops at an entry that is no address: the hop to its right is the client", () => {
    expect(clientAddress("10.0.0.5", "203.0.113.7, unknown", balancers)).toBe("10.0.0.5")
    expect(clientAddress("10.0.0.5", "garbage, 10.0.0.2", balancers)).toBe("10.0.0.2")
    expect(clientAddress("10.0.0.5", "", balancers)).toBe("10.0.0.5")
    expect(clientAddress("10.0.0.5", "203.0.113.7,,", balancers)).toBe("10.0.0.5")
  })

  it("is always the peer or one of the entries, and never a trusted one when an untrusted entry is in the list", async () => {
    const address = fc.oneof(
      fc.ipV4(),
      fc.ipV6(),
      fc.constantFrom("10.0.0.1", "10.9.9.9", "127.0.0.1", "fd00::5", "::1", "unknown", "")
    )
    await fc.assertProperty(fc.tuple(address, fc.array(address, { maxLength: 6 })), ([peer, chain]) => {
      const client = clientAddress(peer, chain.join(", "), balancers)
      expect([peer, ...chain.map((entry) => entry.replace(/^::ffff:(?=\d+\.)/, ""))]).toContain(client)
      if (!balancers.trusts(peer)) expect(client).toBe(peer)
    })
  })
})
