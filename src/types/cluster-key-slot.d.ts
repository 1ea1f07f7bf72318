// cluster-key-slot (the slot function ioredis itself uses) ships no types.
declare module "cluster-key-slot" {
  /** The Redis Cluster hash slot of a key, honouring a {hash tag}. */
  const generate: (key: string) => number
  export default generate
}
