// The worker library with a worker credential behind the built Pinboard with a credentials file
// and an attestation key, on a real redis-server (docs/worker.md "Credentials", "Attestation
// keys"): it registers with its worker key alone, serves what Pinboard forwards (EdDSA
// attestations, verified with the keys of `GET /registry/keys`), refuses an HS256 attestation
// signed with the key derived from the deployment token (what anyone holding that token could
// forge), and calls another instance through Pinboard with its incarnation's caller key. A
// worker whose credential does not cover its id says so in its log.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { keyLine, writeAttestationKey, writeCredentials } from "../support/CredentialFiles.js"
import { attestationKey } from "../../src/contract/AttestationKey.js"
import { defineInstance, startWorker, type PinboardWorker } from "../../src/worker/index.js"
import type { LogLine } from "../../src/worker/WorkerLog.js"
import { Fleet, TOKEN, uid, waitForColdStart, type Pinboard } from "../support/Fleet.js"
import { signTestAttestation } from "../support/TestAttestations.js"
import { poll, scaled } from "../support/Time.js"
import { request } from "../support/Wire.js"

const WORKER_KEY = `lib-${randomBytes(16).toString("hex")}`

const counter = defineInstance({
  activate: () => ({ count: 0 }),
  routes: {
    "GET /echo": (_request, res) => void res.end("echo"),
    "POST /increment": (request, res) => void res.end(String(++request.state.count)),
    "POST /call": async (request, res) => {
      const answer = await request.call("/counters", request.query.get("id")!, "/increment", { method: "POST" })
      res.writeHead(answer.status).end(await answer.text())
    }
  }
})

describe("the worker library with a worker credential (Redis registry)", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  const workers: Array<PinboardWorker> = []
  const logs = new Map<string, Array<LogLine>>()

  const start = async (worker: string) => {
    const log: Array<LogLine> = []
    logs.set(worker, log)
    const started = await startWorker({
      pinboard: pinboard.url,
      registryUrl: pinboard.registryUrl,
      credential: WORKER_KEY,
      worker,
      instances: { "/counters": counter },
      stopOnSignals: [],
      log: (line) => void log.push(line)
    })
    workers.push(started)
    return started
  }

  beforeAll(async () => {
    try {
      const attestationPem = writeAttestationKey(fleet.dir)
      const credentialsFile = writeCredentials(fleet.dir, { workers: [{ name: "lib", sha256: keyLine(WORKER_KEY), workers: ["lib-*"], namespaces: ["/counters"] }] })
      pinboard = await fleet.pinboard({
        redis: await fleet.redis(),
        env: { PINBOARD_CREDENTIALS_FILE: credentialsFile, PINBOARD_ATTESTATION_KEYS: attestationPem }
      })
      await (await start("lib-1")).registered()
      await waitForColdStart(pinboard, "/counters")
    } catch (error) {
      await fleet.stop()
      throw error
    }
  }, scaled(60_000))
  afterAll(async () => {
    for (const worker of workers) await worker.stop()
    await fleet.stop()
  })

  it("serves what Pinboard forwards: the EdDSA attestation verified with the published keys", async () => {
    const id = uid("c")
    expect((await request(pinboard, `/counters/${id}/increment`, { method: "POST" })).text).toBe("1")
    expect((await request(pinboard, `/counters/${id}/increment`, { method: "POST" })).text).toBe("2")
  })

  it("refuses an HS256 attestation signed with the key derived from the deployment token: 401", async () => {
    const [worker] = workers
    const placement = { worker: "lib-1", namespace: "/counters", id: uid("c"), epoch: "1" }
    const forged = await signTestAttestation({ alg: "HS256", secret: attestationKey(TOKEN) }, placement, Date.now())
    const res = await fetch(`${worker!.url}/counters/${placement.id}/increment`, { method: "POST", headers: { "pinboard-attestation": forged } })
    expect(res.status).toBe(401)
  })

  it("calls another instance through Pinboard with its incarnation's caller key", async () => {
    const callee = uid("callee")
    const res = await request(pinboard, `/counters/${uid("caller")}/call?id=${callee}`, { method: "POST" })
    expect([res.status, res.text]).toEqual([200, "1"])
  })

  it("a worker id its credential does not cover: the refusal in its log, retried", async () => {
    await start("billing-1")
    const refusals = await poll(() => {
      const lines = logs.get("billing-1")!.filter((line) => line.message === "register refused, retrying")
      return lines.length >= 2 && lines
    }, { timeoutMs: 10_000, reason: "two refused registrations" })
    expect(refusals[0]).toMatchObject({ level: "error", worker: "billing-1", cause: "register: 403 credential does not cover worker" })
  })
})
