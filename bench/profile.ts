// Where the CPU of one proxied request goes (docs/proxy.md "What a request costs"): Pinboard
// on Redis under the GET load of bench/proxy.ts (wrk; 64 bytes, or 64 KiB), profiled with V8's sampling profiler
// (`--cpu-prof`), its self time summed by where the code comes from.
//
//   npm run bench:profile                          32 connections, 5 s after a 1 s warm-up
//   npm run bench:profile -- --connections=128 --seconds=8
//   npm run bench:profile -- --large               the 64 KiB GET
//   npm run bench:profile -- --floor               the floor of `npm run bench -- --floors` instead
//                                                  (bench/undiciProxy.ts: undici, one EVALSHA and
//                                                  one Effect fiber per request), for comparison
//   npm run bench:profile -- --keep                also keeps the .cpuprofile (path printed),
//                                                  to open in Chrome DevTools
//   npm run bench:profile -- --main=<dir>/dist/main.js
//                                                  another build of Pinboard (an older commit's,
//                                                  checked out and built elsewhere), to compare
//
// The same layout as bench/proxy.ts: the load generator on core 0; redis-server, the worker
// and Pinboard on core 1. Pinboard's CPU per request is read from /proc around the window,
// and only the samples taken in that window are counted (V8's profile clock and this
// process's `process.hrtime` are both the system's monotonic clock). Prints one table: each
// category's share of the busy samples, and that share of the CPU per request.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { killPid } from "../test/support/Processes.js"
import { startRedisServer } from "../test/support/RedisServer.js"
import { measureHttp } from "./measure.js"
import { stopAll } from "./processes.js"
import { startProfiledRig } from "./profiledRig.js"
import { table } from "./proxyReport.js"
import { numberArg, textArg, flagArg } from "./args.js"

const CONNECTIONS = Math.round(numberArg("connections", 32))
const SECONDS = numberArg("seconds", 5)
const WARMUP_S = numberArg("warmup", 1)
const KEEP = flagArg("keep")
const FLOOR = flagArg("floor")
/** `--large`: the 64 KiB GET instead of the 64-byte one. */
const PATH = flagArg("large") ? "large" : "small"
const MAIN = textArg("main")

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string }
}
interface CpuProfile {
  /** µs on the monotonic clock. */
  readonly startTime: number
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const CATEGORIES = [
  "Node HTTP and sockets",
  "undici",
  "ioredis",
  "Effect runtime",
  "GC",
  "Pinboard's own code",
  "other JS (node internals, deps)",
  "native, unattributed",
  "idle"
] as const
type Category = (typeof CATEGORIES)[number]

const NODE_IO = /^node:(_http|http|net|stream|internal\/(http|streams|stream_base|net|js_stream|dns|tls|timers|process\/task_queues|async_hooks))/

/** Which category a sampled frame's self time belongs to, by where its code comes from. */
const categoryOf = ({ functionName, url }: ProfileNode["callFrame"]): Category => {
  if (functionName === "(garbage collector)") return "GC"
  if (functionName === "(idle)") return "idle"
  if (functionName === "(program)" || url === "") return "native, unattributed"
  if (url.includes("/node_modules/undici/") || url.startsWith("node:internal/deps/undici")) return "undici"
  if (/\/node_modules\/(ioredis|redis-parser|denque|cluster-key-slot|standard-as-callback|@ioredis)\//.test(url)) return "ioredis"
  if (url.includes("/node_modules/effect/")) return "Effect runtime"
  if (NODE_IO.test(url)) return "Node HTTP and sockets"
  if (url.includes("/dist/") && !url.includes("/node_modules/")) return "Pinboard's own code"
  return "other JS (node internals, deps)"
}

/** The window, in µs on the monotonic clock. */
interface Window {
  start: number
  end: number
}

/** Each sample in the window, as (node id, µs it stands for). */
const samplesIn = (profile: CpuProfile, window: Window): Array<readonly [number, number]> => {
  const kept: Array<readonly [number, number]> = []
  let at = profile.startTime
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0
    at += delta
    if (at >= window.start && at <= window.end) kept.push([id, delta])
  })
  return kept
}

/** Microseconds of self time per category. */
const summarize = (profile: CpuProfile, samples: ReadonlyArray<readonly [number, number]>): Map<Category, number> => {
  const byNode = new Map(profile.nodes.map((node) => [node.id, categoryOf(node.callFrame)] as const))
  const total = new Map<Category, number>(CATEGORIES.map((c) => [c, 0]))
  for (const [id, micros] of samples) {
    const category = byNode.get(id) ?? "native, unattributed"
    total.set(category, total.get(category)! + micros)
  }
  return total
}

/** The heaviest functions by self time. */
const heaviest = (profile: CpuProfile, samples: ReadonlyArray<readonly [number, number]>, count: number): Array<[string, number]> => {
  const self = new Map<number, number>()
  for (const [id, micros] of samples) self.set(id, (self.get(id) ?? 0) + micros)
  const byFrame = new Map<string, number>()
  for (const node of profile.nodes) {
    const micros = self.get(node.id)
    if (micros === undefined) continue
    const { functionName, url } = node.callFrame
    if (functionName.startsWith("(")) continue
    const where = url.includes("/node_modules/") ? url.replace(/^.*\/node_modules\//, "") : url.replace(/^.*\/dist\//, "dist/")
    const key = `${functionName || "(anonymous)"}  ${where}`
    byFrame.set(key, (byFrame.get(key) ?? 0) + micros)
  }
  return [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, count)
}

const profileDir = mkdtempSync(join(tmpdir(), "pinboard-profile-"))
const redis = await startRedisServer()
try {
  const { worker, profiled, registration, spec, watched } = await startProfiledRig(redis, {
    nodeFlags: ["--cpu-prof", `--cpu-prof-dir=${profileDir}`],
    floor: FLOOR,
    main: MAIN,
    path: PATH,
    connections: CONNECTIONS,
    seconds: SECONDS,
    warmupSeconds: WARMUP_S
  })
  const window: Window = { start: Number(process.hrtime.bigint() / 1000n), end: 0 }
  const { result, cpu } = await measureHttp(profiled.proc.name, spec, watched, [worker, profiled.proc])
  window.end = Number(process.hrtime.bigint() / 1000n)
  registration.stop()
  // SIGTERM: the process exits, and V8 writes the profile on the way out.
  killPid(profiled.proc.pid, "SIGTERM")
  await profiled.proc.exited
  const file = readdirSync(profileDir).find((name) => name.endsWith(".cpuprofile"))
  if (file === undefined) throw new Error(`no profile written in ${profileDir}; ${profiled.proc.name} printed:\n${profiled.proc.lines.join("\n")}`)
  const profile = JSON.parse(readFileSync(join(profileDir, file), "utf8")) as CpuProfile
  const samples = samplesIn(profile, window)
  if (samples.length === 0) throw new Error("no samples in the measured window: the profile's clock is not this process's")
  const totals = summarize(profile, samples)
  const busy = [...totals].filter(([c]) => c !== "idle").reduce((sum, [, us]) => sum + us, 0)
  const cpuPerRequestUs = ((cpu.proxy ?? 0) * 1e6) / result.perSecond

  console.log("")
  console.log(
    `${PATH === "large" ? "64 KiB" : "64-byte"} GET, ${CONNECTIONS} connections: ${Math.round(result.perSecond).toLocaleString("en-US")} req/s, p50 ${result.p50.toFixed(2)} ms, ` +
      `p99 ${result.p99.toFixed(2)} ms; ${profiled.proc.name} ${(cpu.proxy ?? 0).toFixed(2)} of core 1 = ${cpuPerRequestUs.toFixed(0)} µs CPU per request`
  )
  console.log(`Self time of the samples in the window (${samples.length}), and that share of the CPU per request:`)
  console.log(
    table(
      ["where", "share", "µs/request"],
      CATEGORIES.filter((c) => c !== "idle").map((c) => {
        const share = totals.get(c)! / busy
        return [c, `${(share * 100).toFixed(1)}%`, (share * cpuPerRequestUs).toFixed(0)]
      })
    )
  )
  console.log("")
  console.log("Heaviest functions by self time:")
  console.log(table(["function  where", "share"], heaviest(profile, samples, 25).map(([key, us]) => [key, `${((us / busy) * 100).toFixed(1)}%`])))
  if (KEEP) console.log(`\nprofile kept: ${join(profileDir, file)}`)
} finally {
  await stopAll()
  await redis.stop()
  if (!KEEP) rmSync(profileDir, { recursive: true, force: true })
}
