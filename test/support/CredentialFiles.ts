// The files of credentials by role (docs/deploy.md "Credentials") as the end-to-end tests write
// them: a credentials file's key lines, and Ed25519 attestation keys as PEM files.
import { createHash, generateKeyPairSync } from "node:crypto"
import { writeFileSync } from "node:fs"
import { join } from "node:path"

/** How a credentials file names a key: the hex SHA-256 of it. */
export const keyLine = (key: string): string => createHash("sha256").update(key).digest("hex")

export const ed25519Pem = (pair = generateKeyPairSync("ed25519")): string => pair.privateKey.export({ type: "pkcs8", format: "pem" }).toString()

/** Writes a fresh Ed25519 private key to `dir/name`; its path. */
export const writeAttestationKey = (dir: string, name = "attestation.pem"): string => {
  const path = join(dir, name)
  writeFileSync(path, ed25519Pem())
  return path
}

/** Writes a credentials set to `dir/name` as JSON; its path. */
export const writeCredentials = (dir: string, set: unknown, name = "credentials.json"): string => {
  const path = join(dir, name)
  writeFileSync(path, JSON.stringify(set))
  return path
}
