// TLS on the data-plane listener (docs/deploy.md "TLS"): the built Pinboard with
// PINBOARD_TLS_CERT and PINBOARD_TLS_KEY, certificates of a test CA made with openssl, real
// clients (curl, node:tls). Renewed files are taken on SIGHUP and when they change, for new
// connections only; a pair that does not load is refused and the one in use kept; a bad pair
// at start exits 2 naming the variable.
import { execFile } from "node:child_process"
import { copyFileSync, existsSync, readFileSync } from "node:fs"
import https from "node:https"
import tls from "node:tls"
import { X509Certificate } from "node:crypto"
import net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { Fleet, uid, waitForColdStart, type Pinboard } from "../support/Fleet.js"
import { makeTestCa, type TestCa } from "../support/TestCa.js"
import { freePort, spawnProcess } from "../support/Processes.js"
import { poll, within } from "../support/Time.js"
import { headerValues } from "../support/Wire.js"

const NS = "/threads"
const MAIN = new URL("../../dist/main.js", import.meta.url).pathname
let ca: TestCa
const file = (name: string) => ca.file(name)

const serialOf = (name: "a" | "b") => new X509Certificate(readFileSync(file(`${name}.pem`))).serialNumber

/** The files Pinboard is given, as a renewal would replace them. */
const install = (cert: "a" | "b", key: "a" | "b") => {
  copyFileSync(file(`${cert}.pem`), file("live.pem"))
  copyFileSync(file(`${key}.key`), file("live.key"))
}

/** The serial of the certificate a new connection is shown. */
const servedSerial = (port: number): Promise<string> =>
  new Promise((resolve, reject) => {
    const socket = tls.connect({ host: "127.0.0.1", port, servername: "localhost", ca: readFileSync(file("ca.pem")) }, () => {
      resolve(socket.getPeerCertificate().serialNumber)
      socket.end()
    })
    socket.on("error", reject)
  })

/** One GET over HTTPS to `port` on its own connection, trusting the test CA. */
const httpsGet = (port: number) => (path: string): Promise<{ readonly status: number; readonly text: string }> =>
  new Promise((resolve, reject) => {
    const req = https.get({ host: "localhost", port, path, agent: false, ca: readFileSync(file("ca.pem")) }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }))
    })
    req.on("error", reject)
  })

/** A GET on its own TLS connection that opens with a PROXY v1 header naming 203.0.113.9: the raw answer. */
const proxiedGet = (port: number, path: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const tcp = net.connect(port, "127.0.0.1", () => {
      tcp.write("PROXY TCP4 203.0.113.9 127.0.0.1 40000 443\r\n")
      const secure = tls.connect({ socket: tcp, servername: "localhost", ca: readFileSync(file("ca.pem")) }, () =>
        secure.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`)
      )
      const chunks: Array<Buffer> = []
      secure.on("data", (chunk: Buffer) => chunks.push(chunk))
      secure.on("end", () => resolve(Buffer.concat(chunks).toString()))
      secure.on("error", reject)
    })
    tcp.on("error", reject)
  })

const statusAndBody = (raw: string) => ({ status: Number(raw.slice(9, 12)), text: raw.slice(raw.indexOf("\r\n\r\n") + 4) })

let fleet: Fleet
let pinboard: Pinboard

beforeAll(async () => {
  ca = makeTestCa(["a", "b"])
  install("a", "a")
  fleet = new Fleet()
  // The probes and the workers use the registry's own listener, which stays plain HTTP.
  pinboard = await fleet.pinboard({ registryPort: true, env: { PINBOARD_TLS_CERT: file("live.pem"), PINBOARD_TLS_KEY: file("live.key") } })
  await fleet.worker(pinboard, { id: uid("w"), namespaces: [NS] })
  await waitForColdStart(pinboard, NS, undefined, httpsGet(pinboard.port))
})

afterAll(async () => {
  await fleet?.stop()
  ca?.remove()
})

describe("TLS on the data plane", () => {
  it("curl with the test CA gets the worker's answer over HTTPS/1.1 (HTTP/2 off by --http1.1)", async () => {
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        "curl",
        ["-sS", "--http1.1", "--cacert", file("ca.pem"), "-w", "\n%{http_code} %{http_version} %{ssl_verify_result}", `https://localhost:${pinboard.port}${NS}/${uid("t")}/echo`],
        (error, stdout) => (error === null ? resolve(stdout) : reject(error))
      )
    )
    const [body, status] = out.split("\n")
    expect(status).toBe("200 1.1 0")
    expect(JSON.parse(body!)).toHaveProperty("worker")
    expect(pinboard.process.lines.join("\n")).toContain(`pinboard listening on https://127.0.0.1:${pinboard.port}`)
  })

  it("tunnels a WebSocket over wss://", async () => {
    const ws = new WebSocket(`wss://localhost:${pinboard.port}${NS}/${uid("room")}/ws`, { ca: readFileSync(file("ca.pem")) })
    try {
      await within(new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject)), 5000, "the WebSocket's upgrade")
      const echoed = new Promise<string>((resolve) => ws.once("message", (data) => resolve((data as Buffer).toString())))
      ws.send("hello over TLS")
      expect(await within(echoed, 5000, "the echo")).toBe("hello over TLS")
    } finally {
      ws.close()
    }
  })

  it("reads a PROXY header before the TLS handshake", async () => {
    const proxied = await fleet.pinboard({
      registryPort: true,
      env: { PINBOARD_TLS_CERT: file("live.pem"), PINBOARD_TLS_KEY: file("live.key"), PINBOARD_PROXY_PROTOCOL: "1" }
    })
    // Its own embedded registry: a worker of its own, past the cold start (whose requests carry PROXY headers too).
    await fleet.worker(proxied, { id: uid("w"), namespaces: [NS] })
    await waitForColdStart(proxied, NS, undefined, (path) => proxiedGet(proxied.port, path).then(statusAndBody))
    const answer = await proxiedGet(proxied.port, `${NS}/${uid("t")}/echo`)
    expect(answer).toMatch(/^HTTP\/1\.1 200 /)
    const echo = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as { rawHeaders: Array<string> }
    expect(headerValues(echo.rawHeaders, "x-forwarded-for")).toEqual(["203.0.113.9"])
  })

  it("refuses TLS 1.1 and plain HTTP", async () => {
    // openssl's client with TLS 1.1 allowed on its side (security level 0): the refusal is the server's alert.
    const old = await new Promise<string>((resolve) =>
      execFile("openssl", ["s_client", "-connect", `127.0.0.1:${pinboard.port}`, "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"], { timeout: 10_000 }, (_error, stdout, stderr) =>
        resolve(`${stdout}\n${stderr}`)
      ).stdin?.end()
    )
    expect(old).toMatch(/tlsv1 alert protocol version/)
    await expect(fetch(`http://127.0.0.1:${pinboard.port}/healthz`)).rejects.toThrow()
  })

  it("takes renewed files on SIGHUP for new connections; an open connection keeps its certificate", async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: readFileSync(file("ca.pem")) })
    const get = (path: string) =>
      new Promise<{ status: number; serial: string }>((resolve, reject) => {
        const req = https.get({ host: "localhost", port: pinboard.port, path, agent }, (res) => {
          const serial = (res.socket as tls.TLSSocket).getPeerCertificate().serialNumber
          res.resume()
          res.on("end", () => resolve({ status: res.statusCode ?? 0, serial }))
        })
        req.on("error", reject)
      })
    try {
      const id = uid("t")
      expect(await get(`${NS}/${id}/echo`)).toEqual({ status: 200, serial: serialOf("a") })
      install("b", "b")
      process.kill(pinboard.pid, "SIGHUP")
      await poll(async () => (await servedSerial(pinboard.port)) === serialOf("b"), { timeoutMs: 5000, reason: "certificate b on a new connection" })
      // The kept-alive connection was made before: it goes on with a's.
      expect(await get(`${NS}/${id}/echo`)).toEqual({ status: 200, serial: serialOf("a") })
      expect(pinboard.process.lines.some((line) => line.includes("tls certificate loaded") && line.includes('"trigger":"SIGHUP"'))).toBe(true)
    } finally {
      agent.destroy()
    }
  })

  it("takes files that change without a signal", async () => {
    install("a", "a")
    await poll(async () => (await servedSerial(pinboard.port)) === serialOf("a"), { timeoutMs: 10_000, reason: "certificate a after the files changed" })
    expect(pinboard.process.lines.some((line) => line.includes("tls certificate loaded") && line.includes('"trigger":"file change"'))).toBe(true)
  })

  it("refuses a key that is not the certificate's, logs why, and keeps the pair in use", async () => {
    install("b", "a")
    process.kill(pinboard.pid, "SIGHUP")
    await poll(() => pinboard.process.lines.some((line) => line.includes("tls certificate refused") && line.includes('"field":"tls.key"')), {
      timeoutMs: 5000,
      reason: "the refusal's log line"
    })
    expect(await servedSerial(pinboard.port)).toBe(serialOf("a"))
    install("a", "a")
  })
})

describe("TLS settings at start", () => {
  const run = async (env: Record<string, string>) => {
    if (!existsSync(MAIN)) throw new Error("dist/main.js is missing: run `npm run build` before the end-to-end tests")
    const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("PINBOARD_")))
    return spawnProcess(process.execPath, [MAIN], { env: { ...clean, PINBOARD_TOKEN: "t", PINBOARD_PORT: String(await freePort()), ...env } })
  }

  it.each([
    [() => ({ PINBOARD_TLS_CERT: file("a.pem") }), /tls\.key: expected tls\.cert \(PINBOARD_TLS_CERT\) and tls\.key \(PINBOARD_TLS_KEY\) together/],
    [() => ({ PINBOARD_TLS_CERT: file("a.pem"), PINBOARD_TLS_KEY: file("b.key") }), /PINBOARD_TLS_KEY: not usable with the certificate/],
    [() => ({ PINBOARD_TLS_CERT: file("missing.pem"), PINBOARD_TLS_KEY: file("a.key") }), /PINBOARD_TLS_CERT: cannot read/],
    [() => ({ PINBOARD_TLS_CERT: file("san.ext"), PINBOARD_TLS_KEY: file("a.key") }), /PINBOARD_TLS_CERT: expected a PEM file/]
  ])("exits 2 naming the setting: %#", async (env, message) => {
    const child = await run(env())
    expect(await child.exited).toEqual({ code: 2, signal: null })
    expect(child.lines.join("\n")).toMatch(message)
  })
})
