// Shared helpers for the auth end-to-end suites (docs/config.md "Data-plane auth"):
// a local JWKS server that can rotate keys, fail or hang; RSA keys and JWTs minted with jose;
// the HKDF attestation key; Pinboard-Caller tokens; and checks of the Pinboard-Attestation a
// worker received (verified with jose, claims compared exactly).
import { createHash, hkdfSync, randomBytes } from "node:crypto"
import http from "node:http"
import type { AddressInfo } from "node:net"
import { exportJWK, exportSPKI, generateKeyPair, jwtVerify, SignJWT, type CryptoKey, type JWK, type JWTPayload } from "jose"
import { expect } from "vitest"
import WebSocket from "ws"
import { TOKEN, type Pinboard } from "./Fleet.js"
import { headerValues, type Answer } from "./Wire.js"

export const JSON_TYPE = "application/json"
export const TEXT_TYPE = "text/plain; charset=utf-8"

/** Seconds since the epoch, as JWT claims count them. */
export const nowSeconds = (): number => Math.floor(Date.now() / 1000)

export const sha256Hex = (value: string): string => createHash("sha256").update(value, "utf8").digest("hex")

// ---- what the worker saw ----------------------------------------------------------------------

/** The fixture worker's echo (its default path) or its WebSocket "__info__" answer. */
export interface Echo {
  readonly worker: string
  readonly method?: string
  readonly url: string
  readonly headers: Record<string, string | Array<string>>
  readonly rawHeaders: Array<string>
}

export const echoOf = (answer: Answer | { readonly status: number; readonly body: Buffer }): Echo => {
  if (answer.status !== 200) throw new Error(`expected the worker's 200, got ${answer.status}: ${answer.body.toString()}`)
  return JSON.parse(answer.body.toString()) as Echo
}

/** A JSON error Pinboard wrote itself: exact status, content type and body. */
export const expectError = (answer: Answer, status: number, error: string): void => {
  expect({ status: answer.status, contentType: answer.headers["content-type"], body: answer.text }).toEqual({
    status,
    contentType: JSON_TYPE,
    body: JSON.stringify({ error })
  })
}

// ---- the attestation key and Pinboard-Attestation -----------------------------------------------

/** HKDF-SHA256(deployment token, salt "", info "pinboard attestation v1", 32 bytes) (docs/config.md). */
export const attestationKey = (deploymentToken: string = TOKEN): Uint8Array =>
  new Uint8Array(hkdfSync("sha256", deploymentToken, "", "pinboard attestation v1", 32))

export interface VerifiedAttestation {
  readonly payload: JWTPayload & Record<string, unknown>
  readonly alg: string
  readonly header: Record<string, unknown>
}

/** Verifies a Pinboard-Attestation exactly as a worker would: jose, HS256 only, the HKDF key. */
export const verifyAttestation = async (token: string, deploymentToken: string = TOKEN): Promise<VerifiedAttestation> => {
  const { payload, protectedHeader } = await jwtVerify(token, attestationKey(deploymentToken), { algorithms: ["HS256"] })
  return { payload: payload as JWTPayload & Record<string, unknown>, alg: protectedHeader.alg, header: { ...protectedHeader } }
}

/** The claims the attestation of one forward must carry; absent optional fields must be absent. */
export interface ExpectedAttestation {
  /** The worker the request went to (the echo's `worker`). */
  readonly worker: string
  /** With the leading slash, e.g. "/threads". */
  readonly ns: string
  readonly id: string
  readonly depth?: number
  readonly sub?: string
  /** Omitted with a `sub`: the principal has no scopes, so `scope` is absent or "". */
  readonly scope?: string
  readonly caller?: string
}

/**
 * Checks the one Pinboard-Attestation in `rawHeaders`: it verifies (jose, HS256, HKDF key),
 * its claims are exactly iss, aud, iat, exp, ns, id, epoch, depth and, when expected, sub,
 * scope and caller; epoch equals the one forwarded Pinboard-Epoch. Returns the payload.
 */
export const expectAttestation = async (
  rawHeaders: ReadonlyArray<string>,
  expected: ExpectedAttestation
): Promise<JWTPayload & Record<string, unknown>> => {
  const tokens = headerValues(rawHeaders, "pinboard-attestation")
  expect(tokens, "exactly one pinboard-attestation reaches the worker").toHaveLength(1)
  const epochs = headerValues(rawHeaders, "pinboard-epoch")
  expect(epochs, "exactly one pinboard-epoch reaches the worker").toHaveLength(1)
  expect(epochs[0]).toMatch(/^(0|[1-9][0-9]*)$/)

  const before = nowSeconds()
  const { payload, alg } = await verifyAttestation(tokens[0]!)
  expect(alg).toBe("HS256")

  const names = ["iss", "aud", "iat", "exp", "ns", "id", "epoch", "depth"]
  if (expected.sub !== undefined) names.push("sub")
  if (expected.scope !== undefined) names.push("scope")
  // A principal without scopes: the contract leaves `scope` absent or "" (its no scopes, joined).
  else if (expected.sub !== undefined && payload.scope === "") names.push("scope")
  if (expected.caller !== undefined) names.push("caller")
  expect(Object.keys(payload).sort()).toEqual(names.sort())

  expect(payload).toMatchObject({
    iss: "pinboard",
    aud: expected.worker,
    ns: expected.ns,
    id: expected.id,
    epoch: epochs[0],
    depth: expected.depth ?? 0,
    ...(expected.sub === undefined ? {} : { sub: expected.sub }),
    ...(expected.scope === undefined ? {} : { scope: expected.scope }),
    ...(expected.caller === undefined ? {} : { caller: expected.caller })
  })
  expect(typeof payload.epoch).toBe("string")
  expect(Number.isInteger(payload.iat)).toBe(true)
  expect(payload.exp).toBe(payload.iat! + 60)
  // Minted for this forward: iat is "now" within a little clock slack.
  expect(payload.iat!).toBeGreaterThanOrEqual(before - 10)
  expect(payload.iat!).toBeLessThanOrEqual(nowSeconds() + 2)
  return payload
}

/** The Pinboard-Attestation the worker echoed, checked, for a forward that has a principal or not. */
export const expectEchoAttestation = (echo: Echo, expected: Omit<ExpectedAttestation, "worker">) =>
  expectAttestation(echo.rawHeaders, { worker: echo.worker, ...expected })

// ---- Pinboard-Caller ----------------------------------------------------------------------------

export interface CallerClaims {
  /** The calling worker's id (iss). */
  readonly worker: string
  /** "<ns>/<id>" of the calling instance (sub). */
  readonly instance: string
  readonly epoch: string
  readonly depth: number
}

export interface MintCallerOptions {
  /** Signing key; default the HKDF key of TOKEN. */
  readonly key?: Uint8Array
  readonly aud?: string
  readonly iat?: number
  readonly exp?: number
  /** Claims left out of the token. */
  readonly omit?: ReadonlyArray<"iss" | "aud" | "sub" | "epoch" | "depth" | "iat" | "exp">
  /** Claims added or overriding (after `omit`). */
  readonly extra?: Record<string, unknown>
  readonly alg?: "HS256" | "HS384" | "HS512"
}

/** A Pinboard-Caller as a worker library would mint it: HS256 with the HKDF key, exp = iat + 60. */
export const mintCaller = async (claims: CallerClaims, options: MintCallerOptions = {}): Promise<string> => {
  const iat = options.iat ?? nowSeconds()
  const all: Record<string, unknown> = {
    iss: claims.worker,
    aud: options.aud ?? "pinboard",
    sub: claims.instance,
    epoch: claims.epoch,
    depth: claims.depth,
    iat,
    exp: options.exp ?? iat + 60
  }
  for (const name of options.omit ?? []) delete all[name]
  Object.assign(all, options.extra ?? {})
  return new SignJWT(all as JWTPayload).setProtectedHeader({ alg: options.alg ?? "HS256" }).sign(options.key ?? attestationKey())
}

/** An unsigned token (`alg: none`), header and payload as given: "<header>.<payload>." */
export const unsignedToken = (payload: Record<string, unknown>, header: Record<string, unknown> = { alg: "none", typ: "JWT" }): string =>
  `${Buffer.from(JSON.stringify(header)).toString("base64url")}.${Buffer.from(JSON.stringify(payload)).toString("base64url")}.`

// ---- keys and user tokens ---------------------------------------------------------------------

export interface RsaKey {
  readonly kid: string
  readonly privateKey: CryptoKey
  /** The public JWK as a JWKS serves it (kid, alg RS256, use sig). */
  readonly jwk: JWK
  /** The public key as a PEM (SPKI) string. */
  readonly pem: string
}

export const rsaKey = async (kid: string = `kid-${randomBytes(4).toString("hex")}`): Promise<RsaKey> => {
  const { privateKey, publicKey } = await generateKeyPair("RS256", { modulusLength: 2048 })
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" }
  return { kid, privateKey, jwk, pem: await exportSPKI(publicKey) }
}

export interface MintJwtOptions {
  /** A private key (RS256) or the HMAC secret as a string (its UTF-8 bytes) or bytes. */
  readonly key: CryptoKey | Uint8Array | string
  readonly alg?: string
  /** Put in the protected header. */
  readonly kid?: string
  readonly claims?: Record<string, unknown>
  /** Seconds relative to now; default: iat now, exp now + 300, no nbf. */
  readonly expiresIn?: number
  readonly notBeforeIn?: number
}

/** A user JWT: iat now, exp now + expiresIn (default 300 s), optional nbf, plus the claims given. */
export const mintJwt = async (options: MintJwtOptions): Promise<string> => {
  const now = nowSeconds()
  const payload: Record<string, unknown> = { iat: now, exp: now + (options.expiresIn ?? 300) }
  if (options.notBeforeIn !== undefined) payload.nbf = now + options.notBeforeIn
  Object.assign(payload, options.claims ?? {})
  const alg = options.alg ?? (typeof options.key === "string" || options.key instanceof Uint8Array ? "HS256" : "RS256")
  const key = typeof options.key === "string" ? new TextEncoder().encode(options.key) : options.key
  return new SignJWT(payload as JWTPayload)
    .setProtectedHeader({ alg, typ: "JWT", ...(options.kid === undefined ? {} : { kid: options.kid }) })
    .sign(key)
}

/** base64url characters, `length` of them: looks like a token, verifies as nothing. */
export const randomToken = (length: number): string => randomBytes(Math.ceil((length * 3) / 4) + 3).toString("base64url").slice(0, length)

// ---- a local JWKS server ----------------------------------------------------------------------

export type JwksMode = "serve" | "fail" | "hang"

/**
 * A JWKS over HTTP on 127.0.0.1: `serve(keys)` replaces the set (rotation), `fail(status)`
 * answers errors, `hang()` accepts requests and never answers, `close()` stops listening
 * (connections refused from then on). `hits` counts requests received.
 */
export class JwksServer {
  hits = 0
  private keys: Array<JWK> = []
  private mode: JwksMode = "serve"
  private failStatus = 500
  private readonly server: http.Server
  private closed = false

  private constructor(readonly port: number, server: http.Server) {
    this.server = server
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/jwks.json`
  }

  static async start(keys: ReadonlyArray<JWK> = []): Promise<JwksServer> {
    let self: JwksServer | undefined
    const server = http.createServer((req, res) => {
      self!.hits++
      req.resume()
      if (self!.mode === "hang") return
      if (self!.mode === "fail") {
        res.writeHead(self!.failStatus, { "content-type": "text/plain" })
        return res.end("jwks unavailable")
      }
      const body = JSON.stringify({ keys: self!.keys })
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
      res.end(body)
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    self = new JwksServer((server.address() as AddressInfo).port, server)
    self.serve(keys)
    return self
  }

  serve(keys: ReadonlyArray<JWK>): void {
    this.keys = [...keys]
    this.mode = "serve"
  }

  fail(status = 500): void {
    this.failStatus = status
    this.mode = "fail"
  }

  hang(): void {
    this.mode = "hang"
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

// ---- WebSockets -------------------------------------------------------------------------------

/** Opens a WebSocket through Pinboard; rejects with `statusCode` when the answer is not a 101. */
export const openWebSocket = (pinboard: Pinboard, path: string, headers: Record<string, string> = {}): Promise<WebSocket> =>
  new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${pinboard.port}${path}`, { headers })
    ws.once("open", () => resolve(ws))
    ws.once("unexpected-response", (_req, res) => {
      reject(Object.assign(new Error(`unexpected response ${res.statusCode}`), { statusCode: res.statusCode }))
      ws.terminate()
    })
    ws.once("error", reject)
  })

/** The fixture worker's "__info__": the upgrade request it saw. */
export const upgradeInfo = (ws: WebSocket): Promise<Echo> =>
  new Promise((resolve, reject) => {
    ws.once("message", (data) => resolve(JSON.parse(String(data)) as Echo))
    ws.once("close", (code) => reject(new Error(`closed (${code}) before the info message`)))
    ws.send("__info__")
  })

/** A bare upgrade failure as Pinboard writes it (docs/proxy.md "WebSockets"). */
export const bareStatus = (status: string): string => `HTTP/1.1 ${status}\r\nconnection: close\r\n\r\n`
