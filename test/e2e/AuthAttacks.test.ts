// Attacks on data-plane auth and attestation, end to end (docs/config.md
// "Data-plane auth", docs/errors.md): forged, confused, expired, malformed and oversized credentials
// against an RS256 publicKey provider and an HS256 secret provider, forged and replayed
// Pinboard-Caller tokens, and client-sent Pinboard-* headers. Every one gets the documented
// error, never a 500, and Pinboard keeps answering well-formed requests correctly afterwards.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Fleet, registryCall, STANDARD_CONFIG, uid, waitForColdStart, type Pinboard, type Worker } from "../support/Fleet.js"
import { headerNames, headerValues, rawExchange, rawRequestHead, request, type Answer } from "../support/Wire.js"
import {
  attestationKey,
  echoOf,
  expectEchoAttestation,
  expectError,
  mintCaller,
  mintJwt,
  nowSeconds,
  randomToken,
  rsaKey,
  unsignedToken,
  verifyAttestation,
  type CallerClaims,
  type RsaKey
} from "../support/AuthFixtures.js"
import { scaled } from "../support/Time.js"

const ISSUER = "https://issuer.pinboard.test/"
const AUDIENCE = "pinboard-attacks"
const SECRET = "attack-matrix-secret-5c0ffee5c0ffee5c0ffee5c0ffee"

const INVALID_CREDENTIAL = { error: "invalid credential" }
const AUTHENTICATION_REQUIRED = { error: "authentication required" }

describe("auth attacks (embedded registry)", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  let worker: Worker
  let rsa: RsaKey
  let stranger: RsaKey

  beforeAll(async () => {
    ;[rsa, stranger] = await Promise.all([rsaKey(), rsaKey()])
    try {
      pinboard = await fleet.pinboard({
        config: {
          ...STANDARD_CONFIG,
          providers: {
            rsa: { type: "jwt", publicKey: rsa.pem, issuer: ISSUER, audience: AUDIENCE },
            hs: { type: "jwt", secret: SECRET, issuer: ISSUER, audience: AUDIENCE }
          },
          namespaces: [
            { namespace: "/threads", auth: "none" },
            { namespace: "/rsa", auth: "required", providers: ["rsa"] },
            { namespace: "/hs", auth: "required", providers: ["hs"] }
          ]
        }
      })
      worker = await fleet.worker(pinboard, { id: uid("w"), namespaces: ["/threads", "/rsa", "/hs"] })
      await waitForColdStart(pinboard, "/threads")
    } catch (error) {
      await fleet.stop()
      throw error
    }
  }, scaled(60_000))
  afterAll(async () => {
    await fleet.stop()
  })

  const claims = (overrides: Record<string, unknown> = {}) => ({ iss: ISSUER, aud: AUDIENCE, sub: "alice", ...overrides })

  type Target = "/rsa" | "/hs"
  /** A token the provider of `target` accepts. */
  const goodToken = (target: Target, overrides: Record<string, unknown> = {}, options: { expiresIn?: number; notBeforeIn?: number } = {}) =>
    mintJwt({ key: target === "/rsa" ? rsa.privateKey : SECRET, claims: claims(overrides), ...options })

  /** The matrix: an Authorization value per attack, and the error it must get. */
  const attacks = async (target: Target): Promise<Array<{ name: string; authorization: string; errors: Array<object> }>> => {
    const now = nowSeconds()
    const valid = await goodToken(target)
    const [h, , s] = valid.split(".")
    const tampered = `${h}.${Buffer.from(JSON.stringify({ ...claims({ sub: "admin" }), iat: now, exp: now + 300 })).toString("base64url")}.${s}`
    const invalid = (name: string, token: string) => ({ name, authorization: `Bearer ${token}`, errors: [INVALID_CREDENTIAL] })
    return [
      invalid("alg none", unsignedToken({ ...claims(), iat: now, exp: now + 300 })),
      invalid("alg none, upper case", unsignedToken({ ...claims(), iat: now, exp: now + 300 }, { alg: "NONE", typ: "JWT" })),
      invalid("alg none with the valid token's signature", `${unsignedToken({ ...claims(), iat: now, exp: now + 300 })}${s}`),
      invalid(
        "HS256 signed with the RS256 public key PEM as the HMAC secret",
        await mintJwt({ key: rsa.pem, alg: "HS256", claims: claims() })
      ),
      invalid("signed by another key", await mintJwt({ key: target === "/rsa" ? stranger.privateKey : `${SECRET}-not`, claims: claims() })),
      invalid("payload swapped under a valid signature", tampered),
      invalid("wrong issuer", await goodToken(target, { iss: "https://evil.example/" })),
      invalid("wrong audience", await goodToken(target, { aud: "someone-else" })),
      invalid("expired 30 s ago", await goodToken(target, { iat: now - 600 }, { expiresIn: -30 })),
      invalid("not yet valid (nbf in 30 s)", await goodToken(target, {}, { notBeforeIn: 30 })),
      invalid("a.b.c", "a.b.c"),
      invalid("%%%", "%%%"),
      invalid("two segments", `${h}.${s}`),
      invalid("15 KiB of random token", randomToken(15 * 1024)),
      // "Bearer " and nothing: Node trims the trailing space, so Pinboard may see "Bearer" as a
      // credential (invalid) or as none at all (required): either way a 401.
      { name: "Bearer with nothing", authorization: "Bearer ", errors: [INVALID_CREDENTIAL, AUTHENTICATION_REQUIRED] }
    ]
  }

  const expectRejected = (answer: Answer, name: string, errors: Array<object>) => {
    expect({ name, status: answer.status, type: answer.headers["content-type"] }).toEqual({ name, status: 401, type: "application/json" })
    expect(errors.map((e) => JSON.stringify(e)), name).toContain(answer.text)
  }

  for (const target of ["/rsa", "/hs"] as const) {
    describe(`${target === "/rsa" ? "RS256 publicKey" : "HS256 secret"} provider`, () => {
      it("accepts a well-formed token (the baseline)", async () => {
        const id = uid()
        const echo = echoOf(await request(pinboard, `${target}/${id}/echo`, { headers: { authorization: `Bearer ${await goodToken(target)}` } }))
        await expectEchoAttestation(echo, { ns: target, id, sub: "alice" })
      })

      it("rejects every attack in the matrix with 401, never a 500", async () => {
        for (const { name, authorization, errors } of await attacks(target)) {
          expectRejected(await request(pinboard, `${target}/${uid()}/echo`, { headers: { authorization } }), name, errors)
        }
      })

      it("rejects the matrix the same way when it comes all at once", async () => {
        const matrix = await attacks(target)
        const answers = await Promise.all(
          [...matrix, ...matrix, ...matrix].map(async ({ name, authorization, errors }) => ({
            name,
            errors,
            answer: await request(pinboard, `${target}/${uid()}/echo`, { headers: { authorization } })
          }))
        )
        for (const { name, errors, answer } of answers) expectRejected(answer, name, errors)
      })
    })
  }

  it("answers a 64 KiB token with 431 (Node's 16 KiB head limit) and keeps serving", async () => {
    const head = rawRequestHead("GET", `/rsa/${uid()}/echo`, [
      ["Host", "client.example"],
      ["Authorization", `Bearer ${randomToken(64 * 1024)}`]
    ])
    const exchange = await rawExchange(pinboard.port, head, 5000)
    expect(exchange.bytes.toString("latin1").split("\r\n")[0]).toBe("HTTP/1.1 431 Request Header Fields Too Large")
    expect(exchange.closed).toBe(true)

    const id = uid()
    const echo = echoOf(await request(pinboard, `/rsa/${id}/echo`, { headers: { authorization: `Bearer ${await goodToken("/rsa")}` } }))
    await expectEchoAttestation(echo, { ns: "/rsa", id, sub: "alice" })
  })

  // ---- Pinboard-Caller ------------------------------------------------------------------------

  /** An instance of /threads placed by an outside request: what a worker would attest. */
  const place = async (): Promise<CallerClaims & { readonly id: string }> => {
    const id = uid("caller")
    const echo = echoOf(await request(pinboard, `/threads/${id}/echo`))
    return { id, worker: echo.worker, instance: `/threads/${id}`, epoch: headerValues(echo.rawHeaders, "pinboard-epoch")[0]!, depth: 0 }
  }

  const asCaller = async (token: string, target = `/rsa/${uid()}/echo`) => request(pinboard, target, { headers: { "pinboard-caller": token } })

  it('403 {"error":"invalid attestation"} for a Pinboard-Caller signed with a key derived from another deployment token', async () => {
    const caller = await place()
    // The genuine token passes the rule with no credential at all...
    echoOf(await asCaller(await mintCaller(caller)))
    // ...one from another deployment never does, whatever it claims.
    for (const token of ["another-deployment-token", "e2e-deployment-token "]) {
      expectError(await asCaller(await mintCaller(caller, { key: attestationKey(token) })), 403, "invalid attestation")
    }
    const now = nowSeconds()
    const none = unsignedToken({ iss: caller.worker, aud: "pinboard", sub: caller.instance, epoch: caller.epoch, depth: 0, iat: now, exp: now + 60 })
    expectError(await asCaller(none), 403, "invalid attestation")
    // A Pinboard-Attestation (what Pinboard gives workers) is not a Pinboard-Caller.
    const echo = echoOf(await request(pinboard, `/threads/${caller.id}/echo`))
    const attestation = headerValues(echo.rawHeaders, "pinboard-attestation")[0]!
    expectError(await asCaller(attestation), 403, "invalid attestation")
  })

  it('403 {"error":"stale attestation"} for a replayed Pinboard-Caller once its placement moved', async () => {
    const caller = await place()
    const replayed = await mintCaller(caller)
    echoOf(await asCaller(replayed))

    const released = await registryCall(pinboard, "POST", "/registry/release", { namespace: "/threads", id: caller.id, epoch: caller.epoch })
    expect(released).toMatchObject({ status: 200, json: { released: true } })
    expectError(await asCaller(replayed), 403, "stale attestation")

    // Placed again: a new epoch. The old token stays stale; one for the new epoch passes.
    const again = echoOf(await request(pinboard, `/threads/${caller.id}/echo`))
    const epoch = headerValues(again.rawHeaders, "pinboard-epoch")[0]!
    expect(epoch).not.toBe(caller.epoch)
    expectError(await asCaller(replayed), 403, "stale attestation")
    echoOf(await asCaller(await mintCaller({ ...caller, worker: again.worker, epoch })))
  })

  // ---- client-sent Pinboard-* -------------------------------------------------------------------

  it("never trusts nor forwards a client's Pinboard-Attestation or Pinboard-Epoch", async () => {
    const id = uid()
    // Correctly signed (the key leaked, say), for this very forward: still not a credential.
    const now = nowSeconds()
    const forged = await mintCaller({ worker: "x", instance: "/rsa/x", epoch: "1", depth: 0 }, {
      extra: { iss: "pinboard", aud: worker.id, ns: "/rsa", id, epoch: "1", depth: 0, sub: "admin", scope: "all", iat: now, exp: now + 60 }
    })
    const sent: Array<[string, string]> = [
      ["Pinboard-Attestation", forged],
      ["Pinboard-Epoch", "123456789"],
      ["Pinboard-Foo", "bar"]
    ]
    expectError(await request(pinboard, `/rsa/${id}/echo`, { headers: sent }), 401, "authentication required")

    const echo = echoOf(await request(pinboard, `/threads/${id}/echo`, { headers: sent }))
    const claims = await expectEchoAttestation(echo, { ns: "/threads", id })
    expect(headerValues(echo.rawHeaders, "pinboard-attestation")).not.toContain(forged)
    expect(headerValues(echo.rawHeaders, "pinboard-epoch")).not.toContain("123456789")
    expect(claims.sub).toBeUndefined()
    expect(headerNames(echo.rawHeaders).filter((name) => name.startsWith("pinboard-")).sort()).toEqual(["pinboard-attestation", "pinboard-epoch"])
  })

  it("still answers well-formed requests correctly after the matrix", async () => {
    for (const target of ["/rsa", "/hs"] as const) {
      const id = uid()
      const echo = echoOf(
        await request(pinboard, `${target}/${id}/echo`, { headers: { authorization: `Bearer ${await goodToken(target, { scope: "x y" })}` } })
      )
      const payload = await expectEchoAttestation(echo, { ns: target, id, sub: "alice", scope: "x y" })
      expect(payload.aud).toBe(worker.id)
      expectError(await request(pinboard, `${target}/${uid()}/echo`), 401, "authentication required")
    }
    const token = headerValues(echoOf(await request(pinboard, `/threads/${uid()}/echo`)).rawHeaders, "pinboard-attestation")[0]!
    await verifyAttestation(token)
    const health = await request(pinboard, "/healthz")
    expect(health.status).toBe(200)
    expect(pinboard.process.lines.join("\n")).not.toMatch(/internal error/i)
  })
})
