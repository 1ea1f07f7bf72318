// Attestation keys (docs/config.md): PEM Ed25519 private keys, each published as its public JWK
// under the RFC 7638 thumbprint as `kid`; a file that holds anything else is refused by name.
import { createPrivateKey, generateKeyPairSync, sign } from "node:crypto"
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import { calculateJwkThumbprint, compactVerify, importJWK } from "jose"
import { loadAttestationKeys } from "../../src/config/AttestationKeys.js"
import { ed25519Pem } from "../support/CredentialFiles.js"

const dir = mkdtempSync(join(tmpdir(), "pinboard-attestation-keys-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

let files = 0
const write = (content: string): string => {
  const path = join(dir, `key-${++files}.pem`)
  writeFileSync(path, content)
  return path
}


// RFC 8037 appendix A.1's key, and its thumbprint from appendix A.3.
const RFC8037_KEY = createPrivateKey({
  key: { kty: "OKP", crv: "Ed25519", d: "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" },
  format: "jwk"
})
const RFC8037_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"

const loaded = (paths: ReadonlyArray<string>) => {
  const result = loadAttestationKeys(paths)
  if (Result.isFailure(result)) throw new Error(`refused: ${result.failure.path}: ${result.failure.message}`)
  return result.success
}

const problem = (paths: ReadonlyArray<string>) => {
  const result = loadAttestationKeys(paths)
  if (Result.isSuccess(result)) throw new Error("loaded")
  return result.failure
}

describe("loadAttestationKeys", () => {
  it("reads each file's key, in file order, with its public JWK (no d) and its thumbprint as kid", async () => {
    const paths = [write(ed25519Pem()), write(ed25519Pem())]
    const keys = loaded(paths)
    expect(keys).toHaveLength(2)
    expect(keys[0]!.kid).not.toBe(keys[1]!.kid)
    for (const [i, key] of keys.entries()) {
      expect(key.privateKey.type).toBe("private")
      expect(key.privateKey.asymmetricKeyType).toBe("ed25519")
      expect(key.publicJwk).toEqual({ kty: "OKP", crv: "Ed25519", x: expect.any(String), kid: key.kid, alg: "EdDSA", use: "sig" })
      expect(Object.keys(key.publicJwk)).toEqual(["kty", "crv", "x", "kid", "alg", "use"])
      expect(key.kid).toBe(await calculateJwkThumbprint(key.publicJwk, "sha256"))
      // The key in file order: the JWK verifies what the file's key signs.
      const fileKey = createPrivateKey(readFileSync(paths[i]!))
      const jws = `${Buffer.from('{"alg":"EdDSA"}').toString("base64url")}.${Buffer.from("sample").toString("base64url")}`
      const signature = sign(null, Buffer.from(jws), fileKey).toString("base64url")
      const { payload } = await compactVerify(`${jws}.${signature}`, await importJWK(key.publicJwk, "EdDSA"))
      expect(Buffer.from(payload).toString()).toBe("sample")
    }
  })

  it("the kid of RFC 8037's example key is RFC 8037's thumbprint", () => {
    const [key] = loaded([write(RFC8037_KEY.export({ format: "pem", type: "pkcs8" }).toString())])
    expect(key!.kid).toBe(RFC8037_THUMBPRINT)
    expect(key!.publicJwk.x).toBe("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
  })

  it("no files, no keys", () => {
    expect(loaded([])).toEqual([])
  })

  it("refuses two files holding one key: a duplicate kid", () => {
    const first = write(ed25519Pem())
    const second = join(dir, "copy.pem")
    copyFileSync(first, second)
    const refused = problem([first, second])
    expect(refused.path).toBe(second)
    expect(refused.message).toBe(`holds the same key as ${JSON.stringify(first)} (kid ${loaded([first])[0]!.kid})`)
  })

  describe("refuses, naming the file", () => {
    const rsa = () => generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey
    const ec = () => generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey
    const cases: ReadonlyArray<readonly [string, () => string, RegExp]> = [
      ["an RSA key", () => write(rsa().export({ format: "pem", type: "pkcs8" }).toString()), /^expected an Ed25519 private key, got an rsa key$/],
      ["an EC key (PKCS#8)", () => write(ec().export({ format: "pem", type: "pkcs8" }).toString()), /^expected an Ed25519 private key, got an ec key$/],
      ["an EC key (SEC1)", () => write(ec().export({ format: "pem", type: "sec1" }).toString()), /^expected an Ed25519 private key, got an ec key$/],
      [
        "an Ed25519 public key",
        () => write(generateKeyPairSync("ed25519").publicKey.export({ format: "pem", type: "spki" }).toString()),
        /^expected an Ed25519 private key, got a public key$/
      ],
      [
        "an encrypted key",
        () => write(generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8", cipher: "aes-256-cbc", passphrase: "secret" }).toString()),
        /^expected an unencrypted Ed25519 private key, got an encrypted one/
      ],
      ["garbage", () => write("not a key at all\n"), /^expected a PEM file, found no "-----BEGIN" line$/],
      ["a PEM block that holds no key", () => write("-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n"), /^expected an Ed25519 private key, got a PEM block that is no key \(.+\)$/],
      ["a missing file", () => join(dir, "missing.pem"), /^cannot be read \(ENOENT.*\)$/]
    ]
    for (const [name, make, message] of cases) {
      it(name, () => {
        const path = make()
        const refused = problem([write(ed25519Pem()), path])
        expect(refused.path).toBe(path)
        expect(refused.message).toMatch(message)
      })
    }
  })
})
