// What `Pinboard-Attestation` is signed with (docs/deploy.md "Credentials"): the first attestation
// key (EdDSA) with every key's public JWK published, or without keys the key derived from the
// deployment token (HS256), with nothing published. Keys are read again on SIGHUP and when a
// file changes; a set that does not load is refused and the one in use kept.
import { Redacted, Result } from "effect"
import type { PinboardConfig } from "../Config.js"
import { attestationKey } from "../contract/AttestationKey.js"
import { type AttestationClaims, makeAttestationSigner, type AttestationSigner } from "./Attestation.js"
import { type AttestationKeyPair, type AttestationKeyProblem, type AttestationPublicJwk, loadAttestationKeys } from "../config/AttestationKeys.js"

export interface SigningKeys {
  readonly attest: (claims: AttestationClaims, nowMs: number) => string
  /** What `GET /registry/keys` answers. */
  readonly published: () => ReadonlyArray<AttestationPublicJwk>
  /** Without attestation keys, the key derived from the deployment token, which signs caller tokens too. */
  readonly derivedKey: Uint8Array | undefined
  /** Reads the key files again; the problem when they do not load (the keys in use are kept). */
  readonly reload: () => Result.Result<void, AttestationKeyProblem>
}

const signerOf = (pairs: ReadonlyArray<AttestationKeyPair>): AttestationSigner => {
  const first = pairs[0]!
  return makeAttestationSigner({ alg: "EdDSA", kid: first.kid, privateKey: first.privateKey })
}

/** Config.ts has loaded the key files once: a failure here is a file changed meanwhile, and throws. */
export const makeSigningKeys = (config: Pick<PinboardConfig, "token" | "attestation">): SigningKeys => {
  const paths = config.attestation.keys
  if (paths.length === 0) {
    // The schema asks for the token when there are no attestation keys.
    const derivedKey = attestationKey(Redacted.value(config.token!))
    return { attest: makeAttestationSigner({ alg: "HS256", secret: derivedKey }), published: () => [], derivedKey, reload: () => Result.succeed(undefined) }
  }
  const load = () => Result.map(loadAttestationKeys(paths), (pairs) => ({ sign: signerOf(pairs), published: pairs.map((pair) => pair.publicJwk) }))
  let current = Result.getOrThrowWith(load(), (problem) => new Error(`${problem.path}: ${problem.message}`))
  return {
    attest: (claims, nowMs) => current.sign(claims, nowMs),
    published: () => current.published,
    derivedKey: undefined,
    reload: () =>
      Result.map(load(), (loaded) => {
        current = loaded
      })
  }
}
