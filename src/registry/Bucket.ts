// The bucket of an id (DESIGN 3): the first 4 bytes of sha1(env "\n" namespace "\n" id),
// unsigned big-endian, mod the number of buckets.
import { createHash } from "node:crypto"

export const bucketOf = (env: string, namespace: string, id: string, buckets: number): number =>
  createHash("sha1").update(`${env}\n${namespace}\n${id}`).digest().readUInt32BE(0) % buckets
