// Data-plane auth and attestation end to end (docs/config.md
// "Data-plane auth", docs/proxy.md "Check order", docs/errors.md): the built Pinboard with
// `providers` and `namespaces` in its JSON config, fixture workers that echo what they
// received, a local JWKS server, and tokens minted with jose. Most suites run on the embedded
// registry; calls from an instance (where staleness is looked up) run on a real redis-server.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  Fleet,
  placementOf,
  registryCall,
  STANDARD_CONFIG,
  uid,
  useStandardFleet,
  waitForColdStart,
  type Pinboard,
  type StandardFleet,
  type Worker
} from "../support/Fleet.js"
import { poll, scaled } from "../support/Time.js"
import { headerNames, headerValues, rawExchange, rawUpgradeHead, request, type Answer } from "../support/Wire.js"
import {
  attestationKey,
  bareStatus,
  echoOf,
  expectEchoAttestation,
  expectError,
  JwksServer,
  mintCaller,
  mintJwt,
  nowSeconds,
  openWebSocket,
  rsaKey,
  sha256Hex,
  TEXT_TYPE,
  unsignedToken,
  upgradeInfo,
  verifyAttestation,
  type CallerClaims,
  type Echo,
  type RsaKey
} from "../support/AuthFixtures.js"

const ISSUER = "https://id.pinboard.test/"
const AUDIENCE = "pinboard-e2e"
/** Non-ASCII on purpose: the provider must use its UTF-8 bytes (docs/config.md "Providers"). */
const SECRET = "sécret-ключ-🔑-4f9a1c2e7b3d8e6f0a5b9c1d2e3f4a5b"

const INVALID_CREDENTIAL = "invalid credential"
const AUTHENTICATION_REQUIRED = "authentication required"
const INSUFFICIENT_SCOPE = "insufficient scope"
const NAMESPACE_NOT_ALLOWED = "namespace not allowed"
const INVALID_ATTESTATION = "invalid attestation"
const ATTESTATION_EXPIRED = "attestation expired"
const STALE_ATTESTATION = "stale attestation"

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** Starts a Pinboard and workers into `fleet`, then waits out cold start through an auth "none" namespace. */
const startFleet = async (
  fleet: Fleet,
  options: {
    readonly config: Record<string, unknown>
    readonly workers: ReadonlyArray<ReadonlyArray<string>>
    readonly warm: string
    readonly redis?: boolean
  }
): Promise<{ pinboard: Pinboard; workers: Array<Worker> }> => {
  try {
    const redis = options.redis === true ? await fleet.redis() : undefined
    const pinboard = await fleet.pinboard({ ...(redis === undefined ? {} : { redis }), config: options.config })
    const workers = await Promise.all(options.workers.map((namespaces) => fleet.worker(pinboard, { id: uid("w"), namespaces })))
    // Cold start is per bucket: polling every bucket through one open namespace warms them all.
    await waitForColdStart(pinboard, options.warm)
    return { pinboard, workers }
  } catch (error) {
    await fleet.stop()
    throw error
  }
}

// ==== no `namespaces`: open, and the attestation on every forward ===============================

describe("no namespaces in config: open, every forward attested (embedded registry)", () => {
  const standard = useStandardFleet("embedded")
  let f: StandardFleet
  beforeAll(() => {
    f = standard.get()
  })

  it("forwards without any credential, with one Pinboard-Attestation verifiable by jose (HS256, HKDF of the deployment token), claims exact", async () => {
    const id = `${uid()}.x~y_z`
    const echo = echoOf(await request(f.pinboard, `/threads/${id}/echo?q=1`))
    expect(echo.worker).toBe(f.a.id)
    const claims = await expectEchoAttestation(echo, { ns: "/threads", id, depth: 0 })
    expect((await placementOf(f.pinboard, "/threads", id))!.epoch).toBe(claims.epoch)

    // Minted per forward for the worker it goes to: /pair lands on either worker, aud follows.
    for (let i = 0; i < 3; i++) {
      const pairId = uid()
      const pair = echoOf(await request(f.pinboard, `/pair/${pairId}`))
      await expectEchoAttestation(pair, { ns: "/pair", id: pairId })
      expect([f.a.id, f.b.id]).toContain(pair.worker)
    }
  })

  it("does not verify with a key from another deployment token, nor as anything but HS256", async () => {
    const echo = echoOf(await request(f.pinboard, `/threads/${uid()}/echo`))
    const token = headerValues(echo.rawHeaders, "pinboard-attestation")[0]!
    await expect(verifyAttestation(token, "another-deployment-token")).rejects.toThrow()
    expect(JSON.parse(Buffer.from(token.split(".")[0]!, "base64url").toString())).toMatchObject({ alg: "HS256" })
  })

  it("forwards a credential unchanged without checking it: the attestation names no principal", async () => {
    const id = uid()
    const echo = echoOf(await request(f.pinboard, `/threads/${id}/echo`, { headers: { authorization: "Bearer not-a-real.token.at-all" } }))
    expect(headerValues(echo.rawHeaders, "authorization")).toEqual(["Bearer not-a-real.token.at-all"])
    await expectEchoAttestation(echo, { ns: "/threads", id })
  })

  it("attests WebSocket upgrades the same way", async () => {
    const id = uid()
    const ws = await openWebSocket(f.pinboard, `/threads/${id}/ws`)
    try {
      const info = await upgradeInfo(ws)
      expect(info.worker).toBe(f.a.id)
      await expectEchoAttestation(info, { ns: "/threads", id })
    } finally {
      ws.terminate()
    }
  })

  it("strips a client's Pinboard-Attestation, Pinboard-Epoch and Pinboard-Foo: the worker sees Pinboard's own, once", async () => {
    const id = uid()
    // A forged attestation signed with the right key, claiming a principal: still never passed on.
    const forged = await mintCaller({ worker: f.a.id, instance: "/threads/forged", epoch: "1", depth: 0 }, {
      aud: f.a.id,
      extra: { iss: "pinboard", ns: "/threads", id, sub: "admin", scope: "everything" }
    })
    const headers: Array<[string, string]> = [
      ["Pinboard-Attestation", forged],
      ["pinboard-attestation", "second-copy"],
      ["Pinboard-Epoch", "999999"],
      ["Pinboard-Foo", "from-client"],
      ["Pinboard-Caller-Extra", "from-client"]
    ]
    const echo = echoOf(await request(f.pinboard, `/threads/${id}/echo`, { headers }))
    const claims = await expectEchoAttestation(echo, { ns: "/threads", id })
    expect(headerValues(echo.rawHeaders, "pinboard-attestation")[0]).not.toBe(forged)
    expect(claims.epoch).toBe((await placementOf(f.pinboard, "/threads", id))!.epoch)
    expect(claims.epoch).not.toBe("999999")
    expect(headerNames(echo.rawHeaders).filter((name) => name.startsWith("pinboard-")).sort()).toEqual([
      "pinboard-attestation",
      "pinboard-epoch"
    ])
    expect(JSON.stringify(echo.rawHeaders)).not.toContain("from-client")
    expect(JSON.stringify(echo.rawHeaders)).not.toContain("second-copy")

    const ws = await openWebSocket(f.pinboard, `/threads/${id}/ws`, {
      "Pinboard-Attestation": forged,
      "Pinboard-Epoch": "999999",
      "Pinboard-Foo": "from-client"
    })
    try {
      const info = await upgradeInfo(ws)
      await expectEchoAttestation(info, { ns: "/threads", id })
      expect(headerValues(info.rawHeaders, "pinboard-attestation")[0]).not.toBe(forged)
      expect(headerNames(info.rawHeaders).filter((name) => name.startsWith("pinboard-")).sort()).toEqual([
        "pinboard-attestation",
        "pinboard-epoch"
      ])
    } finally {
      ws.terminate()
    }
  })
})

// ==== rules, credentials, providers, scopes ======================================================

const API_KEY_SHARED = "pk_shared_8d1f0e7c6b5a4f3e2d1c0b9a"
const API_KEY_READER = "pk_reader_0a1b2c3d4e5f60718293a4b5"
const API_KEY_ONLY_B = "pk_only_b_f0e1d2c3b4a5968778695a4b"

describe("data-plane rules (embedded registry)", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  let jwks: JwksServer
  let jwksKey: RsaKey
  let rsa: RsaKey
  let other: RsaKey

  const NAMESPACES = ["/open", "/opt", "/req", "/jwks", "/rsa", "/hs", "/keys", "/order", "/mixed", "/scoped", "/hdr", "/cookie", "/fallback"]

  beforeAll(async () => {
    ;[jwksKey, rsa, other] = await Promise.all([rsaKey("jwks-k1"), rsaKey(), rsaKey("jwks-k1")])
    jwks = await JwksServer.start([jwksKey.jwk])
    const config = {
      ...STANDARD_CONFIG,
      providers: {
        // Config order matters to rules without `providers`: keysA is tried before keysB.
        keysA: {
          type: "apikey",
          keys: [
            { sha256: sha256Hex(API_KEY_SHARED), subject: "from-a", scopes: ["threads", "write"] },
            { sha256: sha256Hex(API_KEY_READER), subject: "reader", scopes: ["threads"] }
          ]
        },
        keysB: {
          type: "apikey",
          keys: [
            { sha256: sha256Hex(API_KEY_SHARED), subject: "from-b", scopes: ["b"] },
            { sha256: sha256Hex(API_KEY_ONLY_B).toUpperCase(), subject: "only-b", scopes: ["b"] }
          ]
        },
        jwks: { type: "jwt", jwksUrl: jwks.url, issuer: ISSUER, audience: AUDIENCE },
        rsa: { type: "jwt", publicKey: rsa.pem, issuer: ISSUER, audience: AUDIENCE },
        hs: { type: "jwt", secret: SECRET, issuer: ISSUER, audience: AUDIENCE }
      },
      namespaces: [
        { namespace: "/open", auth: "none" },
        { namespace: "/opt", auth: "optional" },
        { namespace: "/req", auth: "required" },
        { namespace: "/jwks", auth: "required", providers: ["jwks"] },
        { namespace: "/rsa", auth: "required", providers: ["rsa"] },
        { namespace: "/hs", auth: "required", providers: ["hs"] },
        { namespace: "/keys", auth: "required", providers: ["keysA"] },
        { namespace: "/order", auth: "required", providers: ["keysB", "keysA"] },
        { namespace: "/mixed", auth: "required", providers: ["hs", "keysB"] },
        { namespace: "/scoped", auth: "required", providers: ["hs", "keysA"], scopes: ["threads", "write"] },
        { namespace: "/hdr", auth: "required", providers: ["keysA"], credential: { header: "X-Api-Key" } },
        { namespace: "/cookie", auth: "required", providers: ["hs"], credential: { cookie: "session" } },
        { namespace: "*", auth: "required", providers: ["hs"] }
      ]
    }
    ;({ pinboard } = await startFleet(fleet, { config, workers: [NAMESPACES], warm: "/open" }))
  }, scaled(60_000))
  afterAll(async () => {
    await fleet.stop()
    await jwks?.close()
  })

  type Which = "jwks" | "rsa" | "hs"
  /** A user JWT for a provider: iss, aud and sub "alice" unless overridden. */
  const jwtFor = (which: Which, claims: Record<string, unknown> = {}, options: { expiresIn?: number; notBeforeIn?: number } = {}) =>
    mintJwt({
      key: which === "hs" ? SECRET : which === "jwks" ? jwksKey.privateKey : rsa.privateKey,
      ...(which === "jwks" ? { kid: jwksKey.kid } : {}),
      claims: { iss: ISSUER, aud: AUDIENCE, sub: "alice", ...claims },
      ...options
    })

  const get = (ns: string, headers: Record<string, string> | Array<[string, string]> = {}, id = uid()) =>
    request(pinboard, `${ns}/${id}/echo`, { headers })

  /** A 200 from the worker whose attestation names exactly this principal (or none). */
  const expectAdmitted = async (answer: Answer, ns: string, principal: { sub?: string; scope?: string } = {}): Promise<Echo> => {
    const echo = echoOf(answer)
    const id = echo.url.split("/")[2]!
    await expectEchoAttestation(echo, { ns, id, ...principal })
    return echo
  }

  describe("which rule applies", () => {
    it("an exact rule wins over the * rule", async () => {
      await expectAdmitted(await get("/open"), "/open")
    })

    it("a namespace without an exact rule gets the * rule", async () => {
      expectError(await get("/fallback"), 401, AUTHENTICATION_REQUIRED)
      expectError(await get("/fallback", bearer("nope")), 401, INVALID_CREDENTIAL)
      await expectAdmitted(await get("/fallback", bearer(await jwtFor("hs"))), "/fallback", { sub: "alice" })
    })
  })

  describe("auth modes", () => {
    it('"none" checks nothing: a garbage credential passes, is forwarded, and names no principal', async () => {
      const echo = await expectAdmitted(await get("/open", { authorization: "Bearer garbage" }), "/open")
      expect(headerValues(echo.rawHeaders, "authorization")).toEqual(["Bearer garbage"])
    })

    it('"optional": no credential passes with no sub or scope; a present one must verify', async () => {
      await expectAdmitted(await get("/opt"), "/opt")
      await expectAdmitted(await get("/opt", bearer(API_KEY_SHARED)), "/opt", { sub: "from-a", scope: "threads write" })
      await expectAdmitted(await get("/opt", bearer(await jwtFor("hs", { scope: "read" }))), "/opt", { sub: "alice", scope: "read" })
      expectError(await get("/opt", bearer("pk_unknown")), 401, INVALID_CREDENTIAL)
      expectError(await get("/opt", bearer(await jwtFor("hs", { iss: "https://elsewhere/" }))), 401, INVALID_CREDENTIAL)
    })

    it('"required": none gives 401 authentication required, a bad one 401 invalid credential, a good one passes', async () => {
      expectError(await get("/req"), 401, AUTHENTICATION_REQUIRED)
      expectError(await get("/req", bearer("pk_unknown")), 401, INVALID_CREDENTIAL)
      expectError(await get("/req", bearer(await jwtFor("hs", { aud: "someone-else" }))), 401, INVALID_CREDENTIAL)
      await expectAdmitted(await get("/req", bearer(API_KEY_SHARED)), "/req", { sub: "from-a", scope: "threads write" })
      await expectAdmitted(await get("/req", bearer(await jwtFor("rsa", { scope: "a b" }))), "/req", { sub: "alice", scope: "a b" })
    })

    it("applies the rule to WebSocket upgrades: a bare 401 without a credential, an attested 101 with one", async () => {
      const id = uid()
      const refused = await rawExchange(pinboard.port, rawUpgradeHead(`/req/${id}/ws`), 5000)
      expect({ text: refused.bytes.toString("latin1"), closed: refused.closed }).toEqual({ text: bareStatus("401 Unauthorized"), closed: true })
      const invalid = await rawExchange(pinboard.port, rawUpgradeHead(`/req/${id}/ws`, [["Authorization", "Bearer pk_unknown"]]), 5000)
      expect(invalid.bytes.toString("latin1")).toBe(bareStatus("401 Unauthorized"))

      const ws = await openWebSocket(pinboard, `/req/${id}/ws`, bearer(API_KEY_SHARED))
      try {
        const info = await upgradeInfo(ws)
        await expectEchoAttestation(info, { ns: "/req", id, sub: "from-a", scope: "threads write" })
        expect(headerValues(info.rawHeaders, "authorization")).toEqual([`Bearer ${API_KEY_SHARED}`])
      } finally {
        ws.terminate()
      }
    })
  })

  describe("credentials", () => {
    it("default: Authorization with the Bearer prefix removed, case-insensitively; forwarded unchanged", async () => {
      for (const value of [`Bearer ${API_KEY_SHARED}`, `bearer ${API_KEY_SHARED}`, `BEARER ${API_KEY_SHARED}`]) {
        const echo = await expectAdmitted(await get("/keys", { authorization: value }), "/keys", { sub: "from-a", scope: "threads write" })
        expect(headerValues(echo.rawHeaders, "authorization")).toEqual([value])
      }
    })

    it("a configured header: read from it alone, forwarded unchanged", async () => {
      const echo = await expectAdmitted(await get("/hdr", { "x-api-key": API_KEY_SHARED }), "/hdr", { sub: "from-a", scope: "threads write" })
      expect(headerValues(echo.rawHeaders, "x-api-key")).toEqual([API_KEY_SHARED])
      expectError(await get("/hdr", bearer(API_KEY_SHARED)), 401, AUTHENTICATION_REQUIRED)
      expectError(await get("/hdr", { "x-api-key": "pk_unknown" }), 401, INVALID_CREDENTIAL)
    })

    it("a configured cookie: read from the Cookie header, forwarded unchanged", async () => {
      const token = await jwtFor("hs", { sub: "cookie-user" })
      const cookie = `theme=dark; session=${token}; lang=en`
      const echo = await expectAdmitted(await get("/cookie", { cookie }), "/cookie", { sub: "cookie-user" })
      expect(headerValues(echo.rawHeaders, "cookie")).toEqual([cookie])
      expectError(await get("/cookie", { cookie: "theme=dark; lang=en" }), 401, AUTHENTICATION_REQUIRED)
      expectError(await get("/cookie", bearer(token)), 401, AUTHENTICATION_REQUIRED)
      expectError(await get("/cookie", { cookie: "theme=dark; session=not.a.token" }), 401, INVALID_CREDENTIAL)
    })
  })

  describe("providers", () => {
    it("jwt with jwksUrl: RS256 by kid, issuer and audience checked", async () => {
      await expectAdmitted(await get("/jwks", bearer(await jwtFor("jwks", { scope: "threads" }))), "/jwks", { sub: "alice", scope: "threads" })
      expectError(await get("/jwks", bearer(await jwtFor("jwks", { iss: "https://elsewhere/" }))), 401, INVALID_CREDENTIAL)
      expectError(await get("/jwks", bearer(await jwtFor("jwks", { aud: "someone-else" }))), 401, INVALID_CREDENTIAL)
      // Same kid, another key: the signature decides.
      const forged = await mintJwt({ key: other.privateKey, kid: jwksKey.kid, claims: { iss: ISSUER, aud: AUDIENCE, sub: "mallory" } })
      expectError(await get("/jwks", bearer(forged)), 401, INVALID_CREDENTIAL)
      expect(jwks.hits).toBeGreaterThanOrEqual(1)
    })

    it("jwt with publicKey (PEM SPKI, RS256 by default): issuer and audience checked", async () => {
      await expectAdmitted(await get("/rsa", bearer(await jwtFor("rsa"))), "/rsa", { sub: "alice" })
      expectError(await get("/rsa", bearer(await jwtFor("rsa", { iss: "https://elsewhere/" }))), 401, INVALID_CREDENTIAL)
      expectError(await get("/rsa", bearer(await jwtFor("rsa", { aud: "someone-else" }))), 401, INVALID_CREDENTIAL)
      const otherKey = await mintJwt({ key: other.privateKey, claims: { iss: ISSUER, aud: AUDIENCE, sub: "mallory" } })
      expectError(await get("/rsa", bearer(otherKey)), 401, INVALID_CREDENTIAL)
    })

    it("jwt with secret (HS256 by default): the secret is used as its UTF-8 bytes", async () => {
      await expectAdmitted(await get("/hs", bearer(await jwtFor("hs"))), "/hs", { sub: "alice" })
      const latin1 = await mintJwt({ key: new Uint8Array(Buffer.from(SECRET, "latin1")), claims: { iss: ISSUER, aud: AUDIENCE, sub: "alice" } })
      expectError(await get("/hs", bearer(latin1)), 401, INVALID_CREDENTIAL)
      expectError(await get("/hs", bearer(await jwtFor("hs", { iss: "https://elsewhere/" }))), 401, INVALID_CREDENTIAL)
      expectError(await get("/hs", bearer(await jwtFor("hs", { aud: "someone-else" }))), 401, INVALID_CREDENTIAL)
    })

    it("exp and nbf with 5 s of clock tolerance", async () => {
      for (const ns of ["/rsa", "/hs"] as const) {
        const which: Which = ns === "/rsa" ? "rsa" : "hs"
        const iatPast = { iat: nowSeconds() - 120 }
        await expectAdmitted(await get(ns, bearer(await jwtFor(which, iatPast, { expiresIn: -2 }))), ns, { sub: "alice" })
        expectError(await get(ns, bearer(await jwtFor(which, iatPast, { expiresIn: -30 }))), 401, INVALID_CREDENTIAL)
        expectError(await get(ns, bearer(await jwtFor(which, {}, { notBeforeIn: 30 }))), 401, INVALID_CREDENTIAL)
        await expectAdmitted(await get(ns, bearer(await jwtFor(which, {}, { notBeforeIn: 2 }))), ns, { sub: "alice" })
      }
    })

    it("apikey: the SHA-256 of the presented key, its subject and scopes; the hash itself is not a key", async () => {
      await expectAdmitted(await get("/keys", bearer(API_KEY_READER)), "/keys", { sub: "reader", scope: "threads" })
      expectError(await get("/keys", bearer(`${API_KEY_SHARED}x`)), 401, INVALID_CREDENTIAL)
      expectError(await get("/keys", bearer(API_KEY_SHARED.slice(0, -1))), 401, INVALID_CREDENTIAL)
      expectError(await get("/keys", bearer(sha256Hex(API_KEY_SHARED))), 401, INVALID_CREDENTIAL)
      // A key of keysB only: not a provider of this rule.
      expectError(await get("/keys", bearer(API_KEY_ONLY_B)), 401, INVALID_CREDENTIAL)
    })

    it("tries the rule's providers in its order, else every provider in config order; the first to accept wins", async () => {
      // The same key in keysA (subject from-a) and keysB (subject from-b).
      await expectAdmitted(await get("/order", bearer(API_KEY_SHARED)), "/order", { sub: "from-b", scope: "b" })
      await expectAdmitted(await get("/req", bearer(API_KEY_SHARED)), "/req", { sub: "from-a", scope: "threads write" })
      // A provider that rejects does not end the search.
      await expectAdmitted(await get("/mixed", bearer(API_KEY_SHARED)), "/mixed", { sub: "from-b", scope: "b" })
      await expectAdmitted(await get("/mixed", bearer(await jwtFor("hs", { sub: "bob" }))), "/mixed", { sub: "bob" })
      await expectAdmitted(await get("/req", bearer(API_KEY_ONLY_B)), "/req", { sub: "only-b", scope: "b" })
      await expectAdmitted(await get("/req", bearer(await jwtFor("jwks"))), "/req", { sub: "alice" })
      await expectAdmitted(await get("/req", bearer(await jwtFor("hs"))), "/req", { sub: "alice" })
    })
  })

  describe("scopes", () => {
    it("every scope of the rule must be the principal's: from scope, or scp as an array or a string", async () => {
      for (const [claims, scope] of [
        [{ scope: "threads write" }, "threads write"],
        [{ scope: "write extra threads" }, "write extra threads"],
        [{ scp: ["write", "threads"] }, "write threads"],
        [{ scp: "threads write" }, "threads write"]
      ] as Array<[Record<string, unknown>, string]>) {
        await expectAdmitted(await get("/scoped", bearer(await jwtFor("hs", claims))), "/scoped", { sub: "alice", scope })
      }
      await expectAdmitted(await get("/scoped", bearer(API_KEY_SHARED)), "/scoped", { sub: "from-a", scope: "threads write" })
    })

    it('403 {"error":"insufficient scope"} when one is missing', async () => {
      expectError(await get("/scoped", bearer(await jwtFor("hs", { scope: "threads" }))), 403, INSUFFICIENT_SCOPE)
      expectError(await get("/scoped", bearer(await jwtFor("hs", { scp: ["write"] }))), 403, INSUFFICIENT_SCOPE)
      expectError(await get("/scoped", bearer(await jwtFor("hs", { scope: "threadswrite" }))), 403, INSUFFICIENT_SCOPE)
      expectError(await get("/scoped", bearer(await jwtFor("hs"))), 403, INSUFFICIENT_SCOPE)
      expectError(await get("/scoped", bearer(API_KEY_READER)), 403, INSUFFICIENT_SCOPE)
      // The credential is checked first.
      expectError(await get("/scoped"), 401, AUTHENTICATION_REQUIRED)
      expectError(await get("/scoped", bearer("pk_unknown")), 401, INVALID_CREDENTIAL)
    })
  })

  it("a client's Pinboard-Attestation is never trusted: it does not satisfy a rule", async () => {
    const id = uid()
    const forged = await mintCaller({ worker: "any", instance: "/req/x", epoch: "1", depth: 0 }, {
      aud: "any",
      extra: { iss: "pinboard", ns: "/req", id, sub: "admin", scope: "threads write" }
    })
    expectError(await get("/req", { "pinboard-attestation": forged }, id), 401, AUTHENTICATION_REQUIRED)
    expectError(await get("/scoped", { "pinboard-attestation": forged, "pinboard-epoch": "1" }, id), 401, AUTHENTICATION_REQUIRED)
  })
})

// ==== remote JWKS: rotation and outages ==========================================================

describe("remote JWKS: rotation, cache and outages (embedded registry)", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  const servers = {} as Record<"rot" | "cached" | "fail" | "closed" | "hang", JwksServer>
  let k1: RsaKey
  let k2: RsaKey
  let k3: RsaKey
  let closedUrl: string

  const NAMESPACES = ["/open", "/rot", "/cached", "/fail", "/closed", "/hang"]

  beforeAll(async () => {
    ;[k1, k2, k3] = await Promise.all([rsaKey("rot-k1"), rsaKey("rot-k2"), rsaKey("cached-k3")])
    servers.rot = await JwksServer.start([k1.jwk])
    servers.cached = await JwksServer.start([k3.jwk])
    servers.fail = await JwksServer.start([k1.jwk])
    servers.fail.fail(500)
    servers.hang = await JwksServer.start([k1.jwk])
    servers.hang.hang()
    servers.closed = await JwksServer.start([k1.jwk])
    closedUrl = servers.closed.url
    await servers.closed.close()
    const jwt = (url: string) => ({ type: "jwt", jwksUrl: url, issuer: ISSUER, audience: AUDIENCE })
    const config = {
      ...STANDARD_CONFIG,
      providers: {
        rot: jwt(servers.rot.url),
        cached: jwt(servers.cached.url),
        fail: jwt(servers.fail.url),
        closed: jwt(closedUrl),
        hang: jwt(servers.hang.url)
      },
      namespaces: [
        { namespace: "/open", auth: "none" },
        ...(["rot", "cached", "fail", "closed", "hang"] as const).map((name) => ({ namespace: `/${name}`, auth: "required", providers: [name] }))
      ]
    }
    ;({ pinboard } = await startFleet(fleet, { config, workers: [NAMESPACES], warm: "/open" }))
  }, scaled(60_000))
  afterAll(async () => {
    await fleet.stop()
    for (const server of Object.values(servers)) await server?.close()
  })

  const token = (key: RsaKey, sub = "alice") => mintJwt({ key: key.privateKey, kid: key.kid, claims: { iss: ISSUER, aud: AUDIENCE, sub } })

  /** The answer and how long it took. */
  const timed = async (ns: string, headers: Record<string, string>) => {
    const started = performance.now()
    const answer = await request(pinboard, `${ns}/${uid()}/echo`, { headers, timeoutMs: 15_000 })
    return { answer, ms: performance.now() - started }
  }

  it("an outage with a kid not cached answers 401 invalid credential within seconds: JWKS answering 500", async () => {
    const { answer, ms } = await timed("/fail", bearer(await token(k1)))
    expectError(answer, 401, INVALID_CREDENTIAL)
    expect(ms).toBeLessThan(scaled(8000))
    expect(servers.fail.hits).toBeGreaterThanOrEqual(1)
  })

  it("... JWKS server gone (connection refused)", async () => {
    const { answer, ms } = await timed("/closed", bearer(await token(k1)))
    expectError(answer, 401, INVALID_CREDENTIAL)
    expect(ms).toBeLessThan(scaled(8000))
  })

  it("... JWKS server accepting and never answering", async () => {
    const { answer, ms } = await timed("/hang", bearer(await token(k1)))
    expectError(answer, 401, INVALID_CREDENTIAL)
    expect(ms).toBeLessThan(scaled(8000))
    expect(servers.hang.hits).toBeGreaterThanOrEqual(1)
  }, scaled(20_000))

  it("keeps a fetched JWKS: its key still verifies after the server is gone; an unknown kid then fails fast", async () => {
    const echo = echoOf((await timed("/cached", bearer(await token(k3, "cached-user")))).answer)
    await expectEchoAttestation(echo, { ns: "/cached", id: echo.url.split("/")[2]!, sub: "cached-user" })
    await servers.cached.close()
    echoOf((await timed("/cached", bearer(await token(k3)))).answer)
    const unknown = await timed("/cached", bearer(await token(k2)))
    expectError(unknown.answer, 401, INVALID_CREDENTIAL)
    expect(unknown.ms).toBeLessThan(scaled(8000))
  })

  it("follows a key rotation: a token with the new kid passes once Pinboard refetches on the unknown kid", async () => {
    // K1 served: the first fetch.
    const first = echoOf((await timed("/rot", bearer(await token(k1, "k1-user")))).answer)
    await expectEchoAttestation(first, { ns: "/rot", id: first.url.split("/")[2]!, sub: "k1-user" })
    const hitsBefore = servers.rot.hits

    // Rotation: only K2 served from now on. The first K2 token is the first unknown-kid miss;
    // Pinboard may refetch on a miss at most once per 30 s (jose's cooldown, docs/config.md "Providers"), which
    // may count from the first fetch: retry until it passes, never more than the cooldown allows.
    servers.rot.serve([k2.jwk])
    const started = performance.now()
    const passed = await poll(
      async () => {
        const { answer } = await timed("/rot", bearer(await token(k2, "k2-user")))
        if (answer.status === 200) return echoOf(answer)
        expectError(answer, 401, INVALID_CREDENTIAL)
        expect(performance.now() - started, "K2 accepted within the 30 s cooldown and a margin").toBeLessThan(30_000 + scaled(6_000))
        return undefined
      },
      { timeoutMs: 60_000, everyMs: 1000, reason: "a K2 token to pass" }
    )
    await expectEchoAttestation(passed, { ns: "/rot", id: passed.url.split("/")[2]!, sub: "k2-user" })
    expect(servers.rot.hits).toBeGreaterThan(hitsBefore)

    // K1 is no longer served: its tokens fail now, and fast.
    const retired = await timed("/rot", bearer(await token(k1)))
    expectError(retired.answer, 401, INVALID_CREDENTIAL)
    expect(retired.ms).toBeLessThan(scaled(8000))
  }, scaled(60_000))

  it("keeps serving other namespaces throughout", async () => {
    echoOf(await request(pinboard, `/open/${uid()}/echo`))
  })
})

// ==== calls from an instance (Pinboard-Caller) on a real redis-server ============================

describe("calls from an instance (redis registry)", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  let a: Worker
  let b: Worker

  beforeAll(async () => {
    const config = {
      ...STANDARD_CONFIG,
      providers: { hs: { type: "jwt", secret: SECRET, issuer: ISSUER, audience: AUDIENCE } },
      namespaces: [
        { namespace: "/threads", auth: "none" },
        { namespace: "/rooms", auth: "none" },
        { namespace: "/pair", auth: "required", providers: ["hs"] },
        { namespace: "/any", auth: "required", providers: ["hs"], scopes: ["admin"] },
        { namespace: "/star", auth: "required", providers: ["hs"], callers: ["*"] },
        { namespace: "/only-threads", auth: "required", providers: ["hs"], callers: ["/threads"] }
        // No "*" rule: /unruled is not allowed.
      ]
    }
    const shared = ["/pair", "/any", "/star", "/only-threads", "/unruled"]
    const started = await startFleet(fleet, {
      config,
      // A hosts /threads, B hosts /rooms; both host the rest.
      workers: [["/threads", ...shared], ["/rooms", ...shared]],
      warm: "/threads",
      redis: true
    })
    pinboard = started.pinboard
    a = started.workers[0]!
    b = started.workers[1]!
  }, scaled(60_000))
  afterAll(async () => {
    await fleet.stop()
  })

  interface Placed extends CallerClaims {
    readonly ns: string
    readonly id: string
  }

  /** Places a fresh instance of `ns` with an outside request: the caller-to-be. */
  const place = async (ns: "/threads" | "/rooms", depth = 0): Promise<Placed> => {
    const id = uid("caller")
    const echo = echoOf(await request(pinboard, `${ns}/${id}/echo`))
    const epoch = headerValues(echo.rawHeaders, "pinboard-epoch")[0]!
    expect(echo.worker).toBe(ns === "/threads" ? a.id : b.id)
    return { ns, id, worker: echo.worker, instance: `${ns}/${id}`, epoch, depth }
  }

  const call = async (target: string, caller: string | Promise<string>, headers: Record<string, string> = {}) =>
    request(pinboard, target, { headers: { "pinboard-caller": await caller, ...headers } })

  it("a valid Pinboard-Caller skips the data-plane rule; the forward carries depth + 1 and caller", async () => {
    const caller = await place("/threads")
    expectError(await request(pinboard, `/pair/${uid()}/echo`), 401, AUTHENTICATION_REQUIRED)

    for (const depth of [0, 7]) {
      const id = uid()
      const echo = echoOf(await call(`/pair/${id}/echo`, mintCaller({ ...caller, depth })))
      await expectEchoAttestation(echo, { ns: "/pair", id, depth: depth + 1, caller: caller.instance })
      expect(headerNames(echo.rawHeaders).filter((name) => name.startsWith("pinboard-")).sort()).toEqual([
        "pinboard-attestation",
        "pinboard-epoch"
      ])
    }
  })

  it("attests an instance's WebSocket upgrade the same way", async () => {
    const caller = await place("/rooms")
    const id = uid()
    const ws = await openWebSocket(pinboard, `/any/${id}/ws`, { "Pinboard-Caller": await mintCaller({ ...caller, depth: 2 }) })
    try {
      const info = await upgradeInfo(ws)
      await expectEchoAttestation(info, { ns: "/any", id, depth: 3, caller: caller.instance })
    } finally {
      ws.terminate()
    }
  })

  it("new placements prefer the caller's worker", async () => {
    for (const ns of ["/threads", "/rooms"] as const) {
      const caller = await place(ns)
      for (let i = 0; i < 5; i++) {
        const id = uid()
        const echo = echoOf(await call(`/pair/${id}/echo`, mintCaller(caller)))
        expect({ ns, worker: echo.worker }).toEqual({ ns, worker: caller.worker })
        expect(await placementOf(pinboard, "/pair", id)).toMatchObject({ worker: caller.worker })
      }
    }
  })

  it("a rule without callers admits any attested instance, and its scopes do not apply to attested calls", async () => {
    for (const ns of ["/threads", "/rooms"] as const) {
      const caller = await place(ns)
      const id = uid()
      await expectEchoAttestation(echoOf(await call(`/any/${id}/echo`, mintCaller(caller))), {
        ns: "/any",
        id,
        depth: 1,
        caller: caller.instance
      })
    }
    // Outside, the scope applies.
    const token = await mintJwt({ key: SECRET, claims: { iss: ISSUER, aud: AUDIENCE, sub: "alice", scope: "user" } })
    expectError(await request(pinboard, `/any/${uid()}/echo`, { headers: bearer(token) }), 403, INSUFFICIENT_SCOPE)
  })

  it('callers ["/threads"] admits /threads instances and refuses others with 403 insufficient scope; ["*"] admits all', async () => {
    const threads = await place("/threads")
    const rooms = await place("/rooms")
    echoOf(await call(`/only-threads/${uid()}/echo`, mintCaller(threads)))
    expectError(await call(`/only-threads/${uid()}/echo`, mintCaller(rooms)), 403, INSUFFICIENT_SCOPE)
    echoOf(await call(`/star/${uid()}/echo`, mintCaller(threads)))
    echoOf(await call(`/star/${uid()}/echo`, mintCaller(rooms)))
  })

  it('depth 49 passes as 50; depth 50 gives 508 {"error":"subrequest depth exceeded"}', async () => {
    const caller = await place("/threads")
    const id = uid()
    await expectEchoAttestation(echoOf(await call(`/pair/${id}/echo`, mintCaller({ ...caller, depth: 49 }))), {
      ns: "/pair",
      id,
      depth: 50,
      caller: caller.instance
    })
    expectError(await call(`/pair/${uid()}/echo`, mintCaller({ ...caller, depth: 50 })), 508, "subrequest depth exceeded")
    expectError(await call(`/pair/${uid()}/echo`, mintCaller({ ...caller, depth: 1000 })), 508, "subrequest depth exceeded")
  })

  it('403 {"error":"invalid attestation"}: bad signature, garbage, wrong aud, a lifetime over 60 s, missing claims', async () => {
    const caller = await place("/threads")
    const now = nowSeconds()
    const cases: Array<[string, string | Promise<string>]> = [
      ["another key", mintCaller(caller, { key: new Uint8Array(32).fill(7) })],
      ["another deployment token", mintCaller(caller, { key: attestationKey("another-deployment-token") })],
      ["garbage", "garbage"],
      ["a.b.c", "a.b.c"],
      ["empty signature", mintCaller(caller).then((t) => `${t.slice(0, t.lastIndexOf("."))}.`)],
      ["tampered payload", mintCaller(caller).then((t) => {
        const [h, , s] = t.split(".")
        const p = Buffer.from(JSON.stringify({ iss: caller.worker, aud: "pinboard", sub: caller.instance, epoch: caller.epoch, depth: 0, iat: now, exp: now + 60, x: 1 })).toString("base64url")
        return `${h}.${p}.${s}`
      })],
      ["alg none", unsignedToken({ iss: caller.worker, aud: "pinboard", sub: caller.instance, epoch: caller.epoch, depth: 0, iat: now, exp: now + 60 })],
      ["wrong aud", mintCaller(caller, { aud: "not-pinboard" })],
      ["aud is the worker", mintCaller(caller, { aud: caller.worker })],
      ["exp 61 s after iat", mintCaller(caller, { iat: now, exp: now + 61 })],
      ["exp an hour after iat", mintCaller(caller, { iat: now, exp: now + 3600 })],
      ...(["iss", "aud", "sub", "epoch", "depth", "iat", "exp"] as const).map((claim): [string, Promise<string>] => [
        `no ${claim}`,
        mintCaller(caller, { omit: [claim] })
      ])
    ]
    for (const [name, token] of cases) {
      const answer = await call(`/pair/${uid()}/echo`, token)
      expect({ name, status: answer.status, body: answer.text }).toEqual({ name, status: 403, body: JSON.stringify({ error: INVALID_ATTESTATION }) })
      expectError(answer, 403, INVALID_ATTESTATION)
    }
  })

  it('403 {"error":"attestation expired"} past the 5 s tolerance; 2 s past exp still passes', async () => {
    const caller = await place("/threads")
    const now = nowSeconds()
    expectError(await call(`/pair/${uid()}/echo`, mintCaller(caller, { iat: now - 100, exp: now - 40 })), 403, ATTESTATION_EXPIRED)
    expectError(await call(`/pair/${uid()}/echo`, mintCaller(caller, { iat: now - 90, exp: now - 30 })), 403, ATTESTATION_EXPIRED)
    echoOf(await call(`/pair/${uid()}/echo`, mintCaller(caller, { iat: now - 62, exp: now - 2 })))
  })

  it('403 {"error":"stale attestation"}: another epoch, another worker, an id never placed, a released placement', async () => {
    const caller = await place("/threads")
    const cases: Array<[string, CallerClaims]> = [
      ["epoch + 1", { ...caller, epoch: String(BigInt(caller.epoch) + 1n) }],
      ["epoch 0", { ...caller, epoch: caller.epoch === "0" ? "1" : "0" }],
      ["another worker", { ...caller, worker: b.id }],
      ["never placed", { ...caller, instance: `/threads/${uid("never")}` }],
      ["another namespace", { ...caller, instance: `/rooms/${caller.id}` }]
    ]
    for (const [name, claims] of cases) {
      const answer = await call(`/pair/${uid()}/echo`, mintCaller(claims))
      expect({ name, status: answer.status, body: answer.text }).toEqual({ name, status: 403, body: JSON.stringify({ error: STALE_ATTESTATION }) })
    }
    // The real one still passes.
    echoOf(await call(`/pair/${uid()}/echo`, mintCaller(caller)))

    const released = await registryCall(pinboard, "POST", "/registry/release", { namespace: "/threads", id: caller.id, epoch: caller.epoch })
    expect(released).toMatchObject({ status: 200, json: { released: true } })
    expectError(await call(`/pair/${uid()}/echo`, mintCaller(caller)), 403, STALE_ATTESTATION)
  })

  it("check order: id, attestation, depth, data-plane rule", async () => {
    const caller = await place("/threads")
    const bad = mintCaller(caller, { aud: "not-pinboard" })
    // The id first.
    const badId = await call("/threads/bad%20id/echo", bad)
    expect({ status: badId.status, type: badId.headers["content-type"], body: badId.text }).toEqual({
      status: 400,
      type: TEXT_TYPE,
      body: "id must contain only [A-Za-z0-9._~-]"
    })
    // No rule for /unruled: 403 namespace not allowed, with or without a credential...
    expectError(await request(pinboard, `/unruled/${uid()}/echo`), 403, NAMESPACE_NOT_ALLOWED)
    const token = await mintJwt({ key: SECRET, claims: { iss: ISSUER, aud: AUDIENCE, sub: "alice" } })
    expectError(await request(pinboard, `/unruled/${uid()}/echo`, { headers: bearer(token) }), 403, NAMESPACE_NOT_ALLOWED)
    // ...but a bad caller is refused before that, and depth before the rule too.
    expectError(await call(`/unruled/${uid()}/echo`, bad), 403, INVALID_ATTESTATION)
    expectError(await call(`/unruled/${uid()}/echo`, mintCaller(caller, { iat: nowSeconds() - 100, exp: nowSeconds() - 40 })), 403, ATTESTATION_EXPIRED)
    expectError(await call(`/unruled/${uid()}/echo`, mintCaller({ ...caller, epoch: String(BigInt(caller.epoch) + 1n) })), 403, STALE_ATTESTATION)
    expectError(await call(`/unruled/${uid()}/echo`, mintCaller({ ...caller, depth: 50 })), 508, "subrequest depth exceeded")
    // Attestation before depth.
    expectError(await call(`/pair/${uid()}/echo`, mintCaller({ ...caller, depth: 50 }, { aud: "not-pinboard" })), 403, INVALID_ATTESTATION)
  })

  it("keeps serving outside requests afterwards", async () => {
    const id = uid()
    await expectEchoAttestation(echoOf(await request(pinboard, `/threads/${id}/echo`)), { ns: "/threads", id })
  })
})
