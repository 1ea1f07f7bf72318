// Where the registry's Redis is and how every connection to it is made (docs/config.md "Options", docs/deploy.md "Managed Redis"):
// the mode's addresses, and the user, password and TLS of every node and sentinel.
import type { ConnectionOptions } from "node:tls"
import { Redacted } from "effect"
import type { RedisFileContents } from "../config/RedisFiles.js"
import type { PinboardConfig } from "../config/Schema.js"

/** One server's URL, a Cluster's seed nodes or a set of Sentinels, and how each is reached. */
export interface RedisTarget {
  readonly url: string | undefined
  readonly cluster: ReadonlyArray<string> | undefined
  readonly sentinels?: ReadonlyArray<string> | undefined
  readonly sentinelMaster?: string | undefined
  readonly username?: string | undefined
  readonly password?: Redacted.Redacted<string> | undefined
  readonly sentinelUsername?: string | undefined
  readonly sentinelPassword?: Redacted.Redacted<string> | undefined
  /** TLS options; undefined: plain TCP (a rediss:// URL still turns TLS on). */
  readonly tls?: ConnectionOptions | undefined
}

/** The target a configuration's `redis` section names, with its files' contents (config/RedisFiles.ts). */
export const redisTargetOf = (settings: PinboardConfig["redis"], files: RedisFileContents): RedisTarget => ({
  url: settings.url,
  cluster: settings.cluster,
  sentinels: settings.sentinels,
  sentinelMaster: settings.sentinelMaster,
  username: settings.username,
  password: files.password,
  sentinelUsername: settings.sentinelUsername,
  sentinelPassword: settings.sentinelPassword,
  tls:
    settings.tls || files.ca !== undefined || files.cert !== undefined || settings.tlsServername !== undefined
      ? dropUndefined({ ca: files.ca, cert: files.cert, key: files.key, servername: settings.tlsServername })
      : undefined
})

export const dropUndefined = <A extends object>(fields: A): A => Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as A

/** The user, password and TLS of every connection to a node (a URL's own user and password win). */
export const nodeOptions = (target: RedisTarget) =>
  dropUndefined({
    username: target.username,
    password: target.password === undefined ? undefined : Redacted.value(target.password),
    tls: target.tls
  })

/** `host:port` entries (an IPv6 host in brackets) as ioredis Cluster start-up nodes. */
export const clusterNodes = (entries: ReadonlyArray<string>): Array<{ host: string; port: number }> =>
  entries.map((entry) => {
    const colon = entry.lastIndexOf(":")
    return { host: entry.slice(0, colon).replace(/^\[(.*)\]$/, "$1"), port: Number(entry.slice(colon + 1)) }
  })

