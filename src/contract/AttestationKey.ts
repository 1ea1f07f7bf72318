// The attestation key (docs/config.md): HMAC-SHA256 key = HKDF-SHA256(deployment token, salt "",
// info "pinboard attestation v1", 32 bytes). Pinboard and workers derive it alike; Pinboard
// derives it once at start-up.
import { hkdfSync } from "node:crypto"

export const ATTESTATION_KEY_INFO = "pinboard attestation v1"

export const attestationKey = (deploymentToken: string): Uint8Array =>
  new Uint8Array(hkdfSync("sha256", deploymentToken, "", ATTESTATION_KEY_INFO, 32))
