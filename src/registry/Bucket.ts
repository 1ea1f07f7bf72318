// The bucket of an id (DESIGN 3): the first 4 bytes of sha1(env "\n" namespace "\n" id),
// unsigned big-endian, mod the number of buckets.
import { hash } from "node:crypto"

export const bucketOf = (env: string, namespace: string, id: string, buckets: number): number =>
  hash("sha1", `${env}\n${namespace}\n${id}`, "buffer").readUInt32BE(0) % buckets
