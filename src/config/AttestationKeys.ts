// Attestation keys (docs/config.md): the PEM Ed25519 private keys Pinboard signs
// `Pinboard-Attestation` with; the first file's key signs, every file's public key is published
// as a JWK whose `kid` is its RFC 7638 thumbprint, so a worker finds the key a token names.
import { createHash, createPrivateKey, createPublicKey, type KeyObject } from "node:crypto"
import { readFileSync } from "node:fs"
import { Result } from "effect"

/** A public key as `GET /registry/keys` publishes it: never the private `d`. */
export interface AttestationPublicJwk {
  readonly kty: "OKP"
  readonly crv: "Ed25519"
  readonly x: string
  readonly kid: string
  readonly alg: "EdDSA"
  readonly use: "sig"
}

export interface AttestationKeyPair {
  readonly kid: string
  readonly privateKey: KeyObject
  readonly publicJwk: AttestationPublicJwk
}

/** A key file that cannot be used, and why. */
export interface AttestationKeyProblem {
  readonly path: string
  readonly message: string
}

/** The RFC 7638 thumbprint of an Ed25519 public key: SHA-256 of its required members in order, base64url. */
const thumbprint = (x: string): string => createHash("sha256").update(JSON.stringify({ crv: "Ed25519", kty: "OKP", x })).digest("base64url")

const ENCRYPTED_PEM = /-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/

const privateKeyIn = (text: string): Result.Result<KeyObject, string> => {
  if (!text.includes("-----BEGIN ")) return Result.fail(`expected a PEM file, found no "-----BEGIN" line`)
  if (ENCRYPTED_PEM.test(text)) return Result.fail("expected an unencrypted Ed25519 private key, got an encrypted one (Pinboard takes no passphrase)")
  try {
    return Result.succeed(createPrivateKey(text))
  } catch (error) {
    try {
      createPublicKey(text)
      return Result.fail("expected an Ed25519 private key, got a public key")
    } catch {
      return Result.fail(`expected an Ed25519 private key, got a PEM block that is no key (${error instanceof Error ? error.message : String(error)})`)
    }
  }
}

const keyPairIn = (path: string): Result.Result<AttestationKeyPair, AttestationKeyProblem> => {
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch (error) {
    return Result.fail({ path, message: `cannot be read (${error instanceof Error ? error.message : String(error)})` })
  }
  return Result.flatMap(
    Result.mapError(privateKeyIn(text), (message) => ({ path, message })),
    (privateKey): Result.Result<AttestationKeyPair, AttestationKeyProblem> => {
      if (privateKey.asymmetricKeyType !== "ed25519") {
        return Result.fail({ path, message: `expected an Ed25519 private key, got an ${privateKey.asymmetricKeyType} key` })
      }
      const x = createPublicKey(privateKey).export({ format: "jwk" }).x!
      const kid = thumbprint(x)
      return Result.succeed({ kid, privateKey, publicJwk: { kty: "OKP", crv: "Ed25519", x, kid, alg: "EdDSA", use: "sig" } })
    }
  )
}

/** Every file's key in file order, or the first file that does not hold one Ed25519 private key of its own. */
export const loadAttestationKeys = (paths: ReadonlyArray<string>): Result.Result<ReadonlyArray<AttestationKeyPair>, AttestationKeyProblem> =>
  Result.gen(function* () {
    const keys: Array<AttestationKeyPair> = []
    const pathOfKid = new Map<string, string>()
    for (const path of paths) {
      const key = yield* keyPairIn(path)
      const earlier = pathOfKid.get(key.kid)
      if (earlier !== undefined) return yield* Result.fail<AttestationKeyProblem>({ path, message: `holds the same key as ${JSON.stringify(earlier)} (kid ${key.kid})` })
      pathOfKid.set(key.kid, path)
      keys.push(key)
    }
    return keys
  })
