// The header names Pinboard and its workers agree on (docs/proxy.md, docs/worker.md), as
// node:http hands them over: lowercase.

/** The placement epoch a forward resolved against. */
export const EPOCH_HEADER = "pinboard-epoch"
/** The HS256 JWS Pinboard signs for the worker it forwards to. */
export const ATTESTATION_HEADER = "pinboard-attestation"
/** A calling instance's token, on a call from an instance. */
export const CALLER_HEADER = "pinboard-caller"
/** A worker's in-band refusal of an activation: `Pinned-Refusal: lease-unhealthy` on a 503. */
export const REFUSAL_HEADER = "pinned-refusal"
export const LEASE_UNHEALTHY = "lease-unhealthy"

/** Pinboard's own headers (every `Pinboard-*`) and the refusal signal: never relayed. */
export const isPinboardHeader = (name: string): boolean => name.startsWith("pinboard-") || name === REFUSAL_HEADER
