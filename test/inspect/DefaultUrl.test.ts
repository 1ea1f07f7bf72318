// `pinboard inspect`'s default --pinboard (docs/inspect.md): the registry API where the
// configuration puts it.
import { describe, expect, it } from "vitest"
import { defaultPinboardUrl } from "../../src/inspect/Inspect.js"

const NO_TLS = { cert: undefined, key: undefined }
const TLS = { cert: "/tls/tls.crt", key: "/tls/tls.key" }
const registry = (port?: number, host?: string) => ({ maxClockOffsetMs: 1000, port, host })

describe("inspect's default Pinboard URL", () => {
  it("is the data port on loopback, over HTTPS when the data port speaks TLS", () => {
    expect(defaultPinboardUrl({ host: "0.0.0.0", port: 8080, registry: registry(), tls: NO_TLS })).toBe("http://127.0.0.1:8080")
    expect(defaultPinboardUrl({ host: "::", port: 8443, registry: registry(), tls: TLS })).toBe("https://127.0.0.1:8443")
    expect(defaultPinboardUrl({ host: "::1", port: 8080, registry: registry(), tls: NO_TLS })).toBe("http://[::1]:8080")
  })

  it("is the registry's own listener, plain HTTP, when it has one", () => {
    expect(defaultPinboardUrl({ host: "0.0.0.0", port: 8443, registry: registry(8081), tls: TLS })).toBe("http://127.0.0.1:8081")
    expect(defaultPinboardUrl({ host: "0.0.0.0", port: 8443, registry: registry(8081, "10.0.0.5"), tls: TLS })).toBe("http://10.0.0.5:8081")
  })
})
