// Which upgrade offers Pinboard takes (only WebSocket) and the head a declined offer is served
// with (docs/proxy.md "Upgrade offers"): the request line and header lines as received, less
// `Upgrade` and `HTTP2-Settings`.
import { describe, expect, it } from "vitest"
import { headWithoutOffer, isWebSocketOffer } from "../../src/http/UpgradeOffer.js"

describe("upgrade offers", () => {
  it("only WebSocket is taken, in any casing or within a list", () => {
    for (const offer of ["websocket", "WebSocket", "h2c, websocket", " WEBSOCKET "]) expect(isWebSocketOffer(offer), offer).toBe(true)
    for (const offer of [undefined, "", "h2c", "HTTP/2.0", "TLS/1.2", "websockets", "IRC/6.9, h2c"]) expect(isWebSocketOffer(offer), String(offer)).toBe(false)
  })

  it("a declined offer's head drops Upgrade and HTTP2-Settings and keeps every other line as received", () => {
    // Java 17's HttpClient, byte for byte.
    const head = headWithoutOffer({
      method: "POST",
      url: "/threads/a/x?q=1",
      httpVersion: "1.1",
      rawHeaders: [
        "Connection", "Upgrade, HTTP2-Settings",
        "Content-Length", "16",
        "Host", "127.0.0.1:8080",
        "HTTP2-Settings", "AAEAAEAAAAIAAAAAAAMAAAAAAAQBAAAAAAUAAEAAAAYABgAA",
        "Upgrade", "h2c",
        "User-Agent", "Java-http-client/17.0.15",
        "X-Latin1", "caf\u00e9"
      ]
    })
    expect(head.toString("latin1")).toBe(
      "POST /threads/a/x?q=1 HTTP/1.1\r\n" +
        "Connection: Upgrade, HTTP2-Settings\r\nContent-Length: 16\r\nHost: 127.0.0.1:8080\r\n" +
        "User-Agent: Java-http-client/17.0.15\r\nX-Latin1: caf\u00e9\r\n\r\n"
    )
    // node:http reads header bytes as latin1: the bytes go back as they came.
    expect(head.includes(Buffer.from([0x63, 0x61, 0x66, 0xe9]))).toBe(true)
  })
})
