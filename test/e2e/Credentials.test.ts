// Credentials by role, end to end (docs/deploy.md "Credentials"): the built Pinboard on a real
// redis-server with a credentials file and an attestation key. The attack first: a worker
// credential for `chat-*` on /threads tries what one leaked worker configuration could do with
// the deployment token; then what it, an operator key and a workload JWT may do.
import { randomBytes } from "node:crypto"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { keyLine, writeAttestationKey, writeCredentials } from "../support/CredentialFiles.js"
import { exportJWK, generateKeyPair, SignJWT, type JWK } from "jose"
import { Fleet, TOKEN, uid, waitForColdStart, type Pinboard } from "../support/Fleet.js"
import type { RedisServer } from "../support/RedisServer.js"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import { runInspect } from "../support/InspectRun.js"
import { request } from "../support/Wire.js"
import { scaled } from "../support/Time.js"

const OPERATOR_KEY = `op-${randomBytes(16).toString("hex")}`
const CHAT_KEY = `chat-${randomBytes(16).toString("hex")}`
const BILLING_KEY = `billing-${randomBytes(16).toString("hex")}`
const ISSUER = "https://cluster.pinboard.test"
const AUDIENCE = "pinboard"

interface Answer {
  readonly status: number
  readonly json: any
}

describe("credentials by role (Redis registry)", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  let redis: RedisServer
  const PREFIX = uid("pb")
  let backend: Server
  let jwks: Server
  let advertiseUrl: string
  let jwtKey: Awaited<ReturnType<typeof generateKeyPair>>["privateKey"]
  let billing: Answer
  /** What Pinboard was started with, for `pinboard inspect` to read the same configuration. */
  let pinboardEnv: Record<string, string>
  const beats = new Map<string, ReturnType<typeof setInterval>>()
  /** The register answers of the workers `register` keeps, by worker id. */
  const registered = new Map<string, Answer>()

  const call = async (key: string, method: string, path: string, body?: unknown): Promise<Answer> => {
    const res = await fetch(`${pinboard.registryUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(scaled(5000))
    })
    const text = await res.text()
    return { status: res.status, json: text === "" ? undefined : JSON.parse(text) }
  }

  /** Registers `worker` with `key` and keeps its lease; the answer of the register. */
  const register = async (key: string, worker: string, namespaces: ReadonlyArray<string>): Promise<Answer> => {
    const answer = await call(key, "POST", "/registry/workers", { worker, advertiseUrl, namespaces, headroom: 10 })
    if (answer.status === 200) {
      const { incarnation } = answer.json as { incarnation: string }
      const timer = setInterval(() => void call(key, "POST", `/registry/workers/${worker}/heartbeat`, { incarnation, headroom: 10 }).catch(() => undefined), answer.json.heartbeatMs)
      timer.unref()
      beats.set(worker, timer)
      registered.set(worker, answer)
    }
    return answer
  }

  const workloadToken = (sub: string) =>
    new SignJWT({}).setProtectedHeader({ alg: "ES256", kid: "cluster-1" }).setIssuer(ISSUER).setAudience(AUDIENCE).setSubject(sub).setIssuedAt().setExpirationTime("10m").sign(jwtKey)

  beforeAll(async () => {
    try {
      backend = createServer((_req, res) => res.end("served")).listen(0, "127.0.0.1")
      await new Promise((resolve) => backend.once("listening", resolve))
      advertiseUrl = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`

      const pair = await generateKeyPair("ES256")
      jwtKey = pair.privateKey
      const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: "cluster-1", alg: "ES256", use: "sig" }
      jwks = createServer((_req, res) => res.setHeader("content-type", "application/json").end(JSON.stringify({ keys: [jwk] }))).listen(0, "127.0.0.1")
      await new Promise((resolve) => jwks.once("listening", resolve))

      const attestationPem = writeAttestationKey(fleet.dir)
      const credentialsFile = writeCredentials(fleet.dir, {
        operators: [{ name: "oncall", sha256: keyLine(OPERATOR_KEY) }],
        workers: [
          { name: "chat", sha256: keyLine(CHAT_KEY), workers: ["chat-*"], namespaces: ["/threads"] },
          { name: "billing", sha256: keyLine(BILLING_KEY), workers: ["billing-*"], namespaces: ["/billing", "/threads"] },
          { name: "docs", provider: "cluster", workers: ["{sub}"], namespaces: ["/docs"] }
        ]
      })
      const configFile = join(fleet.dir, "pinboard.json")
      writeFileSync(
        configFile,
        JSON.stringify({
          providers: {
            cluster: { type: "jwt", jwksUrl: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`, issuer: ISSUER, audience: AUDIENCE }
          }
        })
      )
      pinboardEnv = { PINBOARD_CONFIG: configFile, PINBOARD_CREDENTIALS_FILE: credentialsFile, PINBOARD_ATTESTATION_KEYS: attestationPem }
      redis = await fleet.redis()
      pinboard = await fleet.pinboard({ redis, prefix: PREFIX, env: pinboardEnv })
      billing = await register(BILLING_KEY, "billing-1", ["/billing", "/threads"])
      expect(billing.status).toBe(200)
      await waitForColdStart(pinboard, "/threads")
    } catch (error) {
      await fleet.stop()
      throw error
    }
  }, scaled(60_000))
  afterAll(async () => {
    for (const timer of beats.values()) clearInterval(timer)
    await fleet.stop()
    backend?.close()
    jwks?.close()
  })

  /** An id of `namespace` placed on billing-1 (the only worker of /billing; of /threads, until chat workers join). */
  const placedOnBilling = async (namespace: string) => {
    const id = uid("x")
    const res = await request(pinboard, `${namespace}/${id}/`)
    expect(res.status).toBe(200)
    const placement = await call(OPERATOR_KEY, "GET", `/registry/placements${namespace}/${id}`)
    expect(placement.json.worker).toBe("billing-1")
    return { namespace, id, epoch: placement.json.epoch as string }
  }

  describe("a worker credential for chat-* on /threads", () => {
    let onThreads: { namespace: string; id: string; epoch: string }
    let onBilling: { namespace: string; id: string; epoch: string }
    beforeAll(async () => {
      onThreads = await placedOnBilling("/threads")
      onBilling = await placedOnBilling("/billing")
    }, scaled(30_000))

    it("cannot register another worker's id, nor a namespace outside its entry", async () => {
      expect(await call(CHAT_KEY, "POST", "/registry/workers", { worker: "billing-1", advertiseUrl, namespaces: ["/threads"], headroom: 1 })).toEqual({
        status: 403,
        json: { error: "credential does not cover worker" }
      })
      expect(await call(CHAT_KEY, "POST", "/registry/workers", { worker: "chat-2", advertiseUrl, namespaces: ["/billing"], headroom: 1 })).toEqual({
        status: 403,
        json: { error: "credential does not cover namespace" }
      })
      expect(await call(CHAT_KEY, "POST", "/registry/workers", { worker: "chat-2", advertiseUrl, namespaces: ["/threads", "/billing"], headroom: 1 })).toEqual({
        status: 403,
        json: { error: "credential does not cover namespace" }
      })
    })

    it("cannot heartbeat or deregister billing-1", async () => {
      expect(await call(CHAT_KEY, "POST", "/registry/workers/billing-1/heartbeat", { incarnation: "x", headroom: 1 })).toEqual({
        status: 403,
        json: { error: "credential does not cover worker" }
      })
      expect(await call(CHAT_KEY, "DELETE", "/registry/workers/billing-1?incarnation=x")).toEqual({ status: 403, json: { error: "operator credential required" } })
    })

    it("cannot release or tag billing-1's placements, in its namespaces or outside them", async () => {
      for (const [route, extra] of [["release", {}], ["tag", { tag: "mine" }]] as const) {
        expect(await call(CHAT_KEY, "POST", `/registry/${route}`, { ...onThreads, ...extra })).toEqual({
          status: 403,
          json: { error: "placement held by another worker" }
        })
        // Not even at a wrong epoch: a 409 would tell the current one.
        expect(await call(CHAT_KEY, "POST", `/registry/${route}`, { ...onThreads, epoch: "1", ...extra })).toEqual({
          status: 403,
          json: { error: "placement held by another worker" }
        })
        expect(await call(CHAT_KEY, "POST", `/registry/${route}`, { ...onBilling, ...extra })).toEqual({
          status: 403,
          json: { error: "credential does not cover namespace" }
        })
      }
      const still = await call(OPERATOR_KEY, "GET", `/registry/placements/threads/${onThreads.id}`)
      expect(still.json).toMatchObject({ worker: "billing-1", epoch: onThreads.epoch, tag: "" })
    })

    it("cannot list the fleet nor read placements", async () => {
      expect(await call(CHAT_KEY, "GET", "/registry/workers")).toEqual({ status: 403, json: { error: "operator credential required" } })
      expect(await call(CHAT_KEY, "GET", `/registry/placements/threads/${onThreads.id}`)).toEqual({ status: 403, json: { error: "operator credential required" } })
    })

    it("registers, heartbeats, releases and tags as chat-*, and reads the public keys", async () => {
      const registered = await register(CHAT_KEY, "chat-1", ["/threads"])
      expect(registered.status).toBe(200)
      expect(registered.json.callerKey).toMatch(/^[A-Za-z0-9_-]{43}$/)
      const heartbeat = await call(CHAT_KEY, "POST", "/registry/workers/chat-1/heartbeat", { incarnation: registered.json.incarnation, headroom: 10 })
      expect(heartbeat.status).toBe(200)
      const keys = await call(CHAT_KEY, "GET", "/registry/keys")
      expect(keys.status).toBe(200)
      expect(keys.json.keys).toEqual([expect.objectContaining({ kty: "OKP", crv: "Ed25519", alg: "EdDSA", kid: expect.any(String) })])
      expect(keys.json.keys[0].d).toBeUndefined()
      // No read shows a caller key.
      expect(JSON.stringify((await call(OPERATOR_KEY, "GET", "/registry/workers")).json)).not.toContain(registered.json.callerKey)
    })

    it("an unknown key is 401", async () => {
      expect(await call("nope", "GET", "/registry/keys")).toEqual({ status: 401, json: { error: "invalid deployment token" } })
    })
  })

  it("an operator key and the deployment token may do every call", async () => {
    for (const key of [OPERATOR_KEY, TOKEN]) {
      expect((await call(key, "GET", "/registry/workers")).status).toBe(200)
      const worker = uid("any")
      const registered = await call(key, "POST", "/registry/workers", { worker, advertiseUrl, namespaces: ["/elsewhere"], headroom: 1 })
      expect(registered.status).toBe(200)
      expect((await call(key, "DELETE", `/registry/workers/${worker}?incarnation=${registered.json.incarnation}`)).status).toBe(204)
    }
  })

  it("pinboard inspect takes an operator key from --key-file; a worker key is refused", async () => {
    const keyFile = (key: string) => {
      const path = join(fleet.dir, `${uid("key")}.key`)
      writeFileSync(path, `${key}\n`)
      return path
    }
    const args = ["workers", "--pinboard", pinboard.registryUrl]
    const operator = await runInspect([...args, "--key-file", keyFile(OPERATOR_KEY)], pinboardEnv)
    expect([operator.code, operator.stderr]).toEqual([0, ""])
    expect(operator.stdout).toContain("billing-1")
    const worker = await runInspect([...args, "--key-file", keyFile(CHAT_KEY)], pinboardEnv)
    expect(worker.code).toBe(1)
    expect(worker.stderr).toContain('answered 403: {"error":"operator credential required"}')
    const none = await runInspect(args, pinboardEnv)
    expect(none.code).toBe(2)
    expect(none.stderr).toContain("the configuration has no deployment token: give an operator key with --key-file FILE")
    expect((await runInspect(args, { ...pinboardEnv, PINBOARD_TOKEN: TOKEN })).code).toBe(0)
  })

  it("a JWT worker credential from the provider's JWKS registers only as its subject", async () => {
    const token = await workloadToken("docs-3")
    expect((await call(token, "POST", "/registry/workers", { worker: "docs-3", advertiseUrl, namespaces: ["/docs"], headroom: 1 })).status).toBe(200)
    expect(await call(token, "POST", "/registry/workers", { worker: "docs-4", advertiseUrl, namespaces: ["/docs"], headroom: 1 })).toEqual({
      status: 403,
      json: { error: "credential does not cover worker" }
    })
    const forged = await new SignJWT({}).setProtectedHeader({ alg: "HS256" }).setSubject("docs-4").sign(new TextEncoder().encode("guess"))
    expect((await call(forged, "POST", "/registry/workers", { worker: "docs-4", advertiseUrl, namespaces: ["/docs"], headroom: 1 })).status).toBe(401)
  })

  it("a caller token signed with another incarnation's key is 403 invalid attestation; its own passes", async () => {
    // billing-1 leaves /threads, so that a new id there goes to chat-a or chat-b.
    clearInterval(beats.get("billing-1"))
    expect((await call(BILLING_KEY, "DELETE", `/registry/workers/billing-1?incarnation=${billing.json.incarnation}`)).status).toBe(204)
    await register(CHAT_KEY, "chat-a", ["/threads"])
    await register(CHAT_KEY, "chat-b", ["/threads"])
    const instance = uid("inst")
    expect((await request(pinboard, `/threads/${instance}/`)).status).toBe(200)
    const row = (await call(OPERATOR_KEY, "GET", `/registry/placements/threads/${instance}`)).json as { worker: string; epoch: string }
    const owner = registered.get(row.worker)!
    const other = registered.get(row.worker === "chat-a" ? "chat-b" : "chat-a")!
    const mint = (signer: Answer, kid: string) =>
      new SignJWT({ iss: row.worker, aud: "pinboard", sub: `/threads/${instance}`, epoch: row.epoch, depth: 0 })
        .setProtectedHeader({ alg: "HS256", kid })
        .setIssuedAt()
        .setExpirationTime("30s")
        .sign(Buffer.from(signer.json.callerKey, "base64url"))
    const target = `/threads/${uid("target")}/`
    const withCaller = async (token: string) => {
      const res = await request(pinboard, target, { headers: { "pinboard-caller": token } })
      return { status: res.status, text: res.text }
    }
    const invalid = { status: 403, text: JSON.stringify({ error: "invalid attestation" }) }
    expect(await withCaller(await mint(other, owner.json.incarnation))).toEqual(invalid)
    expect(await withCaller(await mint(other, other.json.incarnation))).toEqual(invalid)
    // The deployment token's derived key signs nothing here: no kid, and no incarnation holds it.
    const derived = new SignJWT({ iss: row.worker, aud: "pinboard", sub: `/threads/${instance}`, epoch: row.epoch, depth: 0 })
      .setProtectedHeader({ alg: "HS256" })
      .setIssuedAt()
      .setExpirationTime("30s")
    expect(await withCaller(await derived.sign(attestationKey(TOKEN)))).toEqual(invalid)
    expect(await withCaller(await mint(owner, owner.json.incarnation))).toEqual({ status: 200, text: "served" })
    // Another replica on the same registry finds the incarnation's key there.
    const replica = await fleet.pinboard({ redis, prefix: PREFIX, env: pinboardEnv })
    const res = await request(replica, target, { headers: { "pinboard-caller": await mint(owner, owner.json.incarnation) } })
    expect([res.status, res.text]).toEqual([200, "served"])
  })
})

describe("credentials by role in hostname-aware mode (embedded registry)", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  const SITE_KEY = `site-${randomBytes(16).toString("hex")}`
  const ANY_HOST_KEY = `any-${randomBytes(16).toString("hex")}`

  beforeAll(async () => {
    try {
      const attestationPem = writeAttestationKey(fleet.dir)
      pinboard = await fleet.pinboard({
        config: {
          credentials: {
            workers: [
              { name: "site", sha256: keyLine(SITE_KEY), workers: ["site-*"], namespaces: [{ namespace: "/docs", hostname: "A.example", env: "prod" }] },
              { name: "any", sha256: keyLine(ANY_HOST_KEY), workers: ["any-*"], namespaces: [{ namespace: "/docs", hostname: "*", env: "prod" }] }
            ]
          }
        },
        env: { PINBOARD_HOSTNAME_AWARE: "1", PINBOARD_ATTESTATION_KEYS: attestationPem }
      })
    } catch (error) {
      await fleet.stop()
      throw error
    }
  }, scaled(60_000))
  afterAll(() => fleet.stop())

  const registerAs = async (key: string, worker: string, hostname: string, env: string) => {
    const res = await fetch(`${pinboard.registryUrl}/registry/workers`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
      body: JSON.stringify({ worker, advertiseUrl: "http://127.0.0.1:9", namespaces: [{ namespace: "/docs", hostname, env }], headroom: 1 })
    })
    return [res.status, res.status === 200 ? "" : ((await res.json()) as { error: string }).error]
  }

  it("a binding grant covers its hostname (any case), or any hostname with *, in its env only", async () => {
    expect(await registerAs(SITE_KEY, "site-1", "a.example", "prod")).toEqual([200, ""])
    expect(await registerAs(SITE_KEY, "site-2", "A.EXAMPLE", "prod")).toEqual([200, ""])
    expect(await registerAs(SITE_KEY, "site-3", "b.example", "prod")).toEqual([403, "credential does not cover namespace"])
    expect(await registerAs(SITE_KEY, "site-4", "a.example", "staging")).toEqual([403, "credential does not cover namespace"])
    expect(await registerAs(ANY_HOST_KEY, "any-1", "b.example", "prod")).toEqual([200, ""])
    expect(await registerAs(ANY_HOST_KEY, "any-2", "b.example", "")).toEqual([403, "credential does not cover namespace"])
  })

  it("release and tag are covered by namespace and env", async () => {
    const release = async (env: string) => {
      const res = await fetch(`${pinboard.registryUrl}/registry/release`, {
        method: "POST",
        headers: { authorization: `Bearer ${SITE_KEY}` },
        body: JSON.stringify({ namespace: "/docs", id: "x", epoch: "1", env })
      })
      return [res.status, await res.json()]
    }
    expect(await release("prod")).toEqual([409, { released: false, epoch: null }])
    expect(await release("staging")).toEqual([403, { error: "credential does not cover namespace" }])
  })
})
