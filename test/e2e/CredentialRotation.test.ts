// Rotation without a restart, under load (docs/deploy.md "Rotation runbook"): while clients keep
// requests flowing through the built Pinboard to a library worker, the worker's key is rotated
// (a second entry, the worker moved to the new key, the old entry removed) and so are the
// attestation keys (current and next swapped, then a fresh next). No request fails, the
// worker keeps its lease, the old key is refused from then on, and Pinboard signs with the
// key that was published ahead.
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { calculateJwkThumbprint, exportJWK } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ed25519Pem, keyLine } from "../support/CredentialFiles.js"
import { defineInstance, startWorker, type PinboardWorker } from "../../src/worker/index.js"
import type { LogLine } from "../../src/worker/WorkerLog.js"
import { Fleet, uid, waitForColdStart, type Pinboard } from "../support/Fleet.js"
import { setTimeout as sleep } from "node:timers/promises"
import { poll, scaled } from "../support/Time.js"
import { request } from "../support/Wire.js"

const OLD_KEY = `old-${randomBytes(16).toString("hex")}`
const NEW_KEY = `new-${randomBytes(16).toString("hex")}`

const ed25519 = () => generateKeyPairSync("ed25519")
const kidOf = async (pair: ReturnType<typeof ed25519>) => calculateJwkThumbprint(await exportJWK(pair.publicKey))

const echo = defineInstance({ activate: () => ({}), routes: { "GET /echo": (_request, res) => void res.end("echo") } })

describe("rotating credentials and attestation keys under load (Redis registry)", () => {
  const fleet = new Fleet()
  let pinboard: Pinboard
  let worker: PinboardWorker
  const log: Array<LogLine> = []
  const files = {
    credentials: join(fleet.dir, "credentials.json"),
    workerKey: join(fleet.dir, "worker.key"),
    current: join(fleet.dir, "attestation-current.pem"),
    next: join(fleet.dir, "attestation-next.pem")
  }
  const [first, second, third] = [ed25519(), ed25519(), ed25519()]
  const entry = (name: string, key: string) => ({ name, sha256: keyLine(key), workers: ["lib-*"], namespaces: ["/echo"] })

  const registryStatus = async (key: string) =>
    (await fetch(`${pinboard.registryUrl}/registry/keys`, { headers: { authorization: `Bearer ${key}` } })).status

  /** Sends SIGHUP and waits until Pinboard logs that it took `what` once more than before. */
  const reloaded = async (what: "credentials loaded" | "attestation keys loaded") => {
    const count = () => pinboard.process.lines.filter((line) => line.includes(`"message":"${what}"`)).length
    const before = count()
    process.kill(pinboard.pid, "SIGHUP")
    await poll(() => count() > before, { timeoutMs: scaled(5000), reason: what })
  }

  beforeAll(async () => {
    try {
      writeFileSync(files.credentials, JSON.stringify({ workers: [entry("lib", OLD_KEY)] }))
      writeFileSync(files.workerKey, `${OLD_KEY}\n`)
      writeFileSync(files.current, ed25519Pem(first))
      writeFileSync(files.next, ed25519Pem(second))
      pinboard = await fleet.pinboard({
        redis: await fleet.redis(),
        env: { PINBOARD_CREDENTIALS_FILE: files.credentials, PINBOARD_ATTESTATION_KEYS: `${files.current},${files.next}` }
      })
      worker = await startWorker({
        pinboard: pinboard.url,
        registryUrl: pinboard.registryUrl,
        credentialFile: files.workerKey,
        worker: "lib-1",
        instances: { "/echo": echo },
        stopOnSignals: [],
        log: (line) => void log.push(line)
      })
      await worker.registered()
      await waitForColdStart(pinboard, "/echo")
    } catch (error) {
      await fleet.stop()
      throw error
    }
  }, scaled(60_000))
  afterAll(async () => {
    await worker?.stop()
    await fleet.stop()
  })

  it("loses no request, and leaves the old key refused and the next key signing", async () => {
    const ids = Array.from({ length: 20 }, () => uid("e"))
    let running = true
    const failures: Array<string> = []
    let served = 0
    const client = async () => {
      for (let i = 0; running; i++) {
        const res = await request(pinboard, `/echo/${ids[i % ids.length]}/echo`)
        if (res.status === 200 && res.text === "echo") served++
        else failures.push(`${res.status} ${res.text}`)
      }
    }
    const clients = Array.from({ length: 8 }, client)

    await sleep(scaled(500))
    // The worker key: a second entry, the worker moved onto it, the old entry removed.
    writeFileSync(files.credentials, JSON.stringify({ workers: [entry("lib", OLD_KEY), entry("lib-next", NEW_KEY)] }))
    await reloaded("credentials loaded")
    writeFileSync(files.workerKey, `${NEW_KEY}\n`)
    await sleep(pinboard.leaseMs) // heartbeats go out with the new key
    writeFileSync(files.credentials, JSON.stringify({ workers: [entry("lib-next", NEW_KEY)] }))
    await reloaded("credentials loaded")
    await sleep(pinboard.leaseMs)
    // The attestation keys: next (published from the start) becomes current; a fresh next.
    writeFileSync(files.current, ed25519Pem(second))
    writeFileSync(files.next, ed25519Pem(first))
    await reloaded("attestation keys loaded")
    await sleep(scaled(500))
    writeFileSync(files.next, ed25519Pem(third))
    await reloaded("attestation keys loaded")
    await sleep(scaled(1000))
    running = false
    await Promise.all(clients)

    expect(failures).toEqual([])
    expect(served).toBeGreaterThan(100)
    expect(log.filter((line) => line.level === "error" || /lease/.test(line.message))).toEqual([])
    expect(await registryStatus(OLD_KEY)).toBe(401)
    expect(await registryStatus(NEW_KEY)).toBe(200)
    const keys = (await (await fetch(`${pinboard.registryUrl}/registry/keys`, { headers: { authorization: `Bearer ${NEW_KEY}` } })).json()) as {
      keys: Array<{ kid: string }>
    }
    expect(keys.keys.map((key) => key.kid)).toEqual([await kidOf(second), await kidOf(third)])
  }, scaled(60_000))
})
