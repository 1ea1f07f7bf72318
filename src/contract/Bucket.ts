// The bucket of an id (docs/protocol.md): the first 4 bytes of sha1(env "\n" namespace "\n" id),
// unsigned big-endian, mod the number of buckets. Kept for the ids seen recently, so that a
// request for an id in use costs a map lookup, not a hash.
import { hash } from "node:crypto"

/** At most this many ids are kept; then the memory starts afresh. */
const MAX_KEPT_IDS = 50_000
const kept = new Map<string, number>()

export const bucketOf = (env: string, namespace: string, id: string, buckets: number): number => {
  const input = `${env}\n${namespace}\n${id}`
  const known = kept.get(input)
  if (known !== undefined) return known % buckets
  const word = hash("sha1", input, "buffer").readUInt32BE(0)
  if (kept.size >= MAX_KEPT_IDS) kept.clear()
  kept.set(input, word)
  return word % buckets
}
