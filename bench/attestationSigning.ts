// What signing `Pinboard-Attestation` costs per forward (src/auth/Attestation.ts): HS256 with the
// token-derived key against EdDSA with an Ed25519 attestation key, each when the token is signed
// and when the once-a-second cache answers (the same placement forwarded again within the
// second). The figures are docs/proxy.md "Signing attestations with a key pair".
//
//   npm run bench:attest                          50,000 signatures per variant, 5 rounds
//   npm run bench:attest -- --signatures=20000 --rounds=3
//
// Each round runs every variant once, the order rotated every round. Prints, per variant, the
// median over rounds of µs per signature and the rounds' range, then EdDSA's ratio to HS256.
import { generateKeyPairSync } from "node:crypto"
import { makeAttestationSigner, type AttestationClaims, type AttestationSigningKey } from "../src/auth/Attestation.js"
import { attestationKey } from "../src/contract/AttestationKey.js"
import { numberArg } from "./args.js"

const SIGNATURES = Math.round(numberArg("signatures", 50_000))
const ROUNDS = Math.round(numberArg("rounds", 5))

const CLAIMS: AttestationClaims = { worker: "w1", namespace: "/threads", id: "t_8f2a", epoch: "17", depth: 0, principal: undefined, caller: undefined }
const START_MS = 1_800_000_000_000

const KEYS: Record<"HS256" | "EdDSA", AttestationSigningKey> = {
  HS256: { alg: "HS256", secret: attestationKey("bench-deployment-token") },
  EdDSA: { alg: "EdDSA", kid: "bench", privateKey: generateKeyPairSync("ed25519").privateKey }
}

interface Variant {
  readonly name: string
  readonly alg: keyof typeof KEYS
  /** The time of the i-th signature: a new second each time (signed), or one second (kept). */
  readonly nowMs: (i: number) => number
}

const signed = (i: number) => START_MS + i * 1000
const kept = (i: number) => START_MS + (i % 1000)
const VARIANTS: ReadonlyArray<Variant> = [
  { name: "HS256, signed", alg: "HS256", nowMs: signed },
  { name: "EdDSA, signed", alg: "EdDSA", nowMs: signed },
  { name: "HS256, kept for the second", alg: "HS256", nowMs: kept },
  { name: "EdDSA, kept for the second", alg: "EdDSA", nowMs: kept }
]

// Read at the end, so that no signature is optimised away.
let sink = 0

/** µs per signature for SIGNATURES signatures by a new signer. */
const measure = (variant: Variant): number => {
  const sign = makeAttestationSigner(KEYS[variant.alg])
  const t0 = performance.now()
  for (let i = 0; i < SIGNATURES; i++) sink += sign(CLAIMS, variant.nowMs(i)).length
  return ((performance.now() - t0) * 1000) / SIGNATURES
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

const figures = new Map<string, Array<number>>(VARIANTS.map((v) => [v.name, []]))
// Warm-up: every variant once, not counted.
for (const variant of VARIANTS) measure(variant)
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < VARIANTS.length; i++) {
    const variant = VARIANTS[(i + round) % VARIANTS.length]!
    figures.get(variant.name)!.push(measure(variant))
  }
}
const medianOf = (name: string) => median(figures.get(name)!)
console.log(
  `${SIGNATURES.toLocaleString("en-US")} signatures per variant, median of ${ROUNDS} rounds (Node ${process.version}, OpenSSL ${process.versions.openssl})`
)
const width = Math.max(...VARIANTS.map((v) => v.name.length))
for (const variant of VARIANTS) {
  const rounds = figures.get(variant.name)!
  const range = `${Math.min(...rounds).toFixed(2)}–${Math.max(...rounds).toFixed(2)}`
  console.log(`${variant.name.padEnd(width)}  ${medianOf(variant.name).toFixed(2).padStart(6)} µs/signature (${range})`)
}
const ratio = (what: string) => (medianOf(`EdDSA, ${what}`) / medianOf(`HS256, ${what}`)).toFixed(2)
console.log(`EdDSA / HS256: signed ${ratio("signed")}, kept for the second ${ratio("kept for the second")}`)
if (sink === 0) throw new Error("no signature made")
