// What one proxied request allocates on the JS heap, and what the garbage collector does
// about it (docs/proxy.md "Garbage collection"): Pinboard on Redis under the GET load of
// bench/proxy.ts (wrk), with V8's sampling heap profiler on through the inspector, counting
// the objects that were collected as well as the live ones; the GC's pauses are counted
// inside the process from `perf_hooks`.
//
//   npm run bench:alloc                          64-byte GET, 32 connections, 5 s after a 2 s warm-up
//   npm run bench:alloc -- --large               the 64 KiB GET
//   npm run bench:alloc -- --sites=60            the 60 heaviest allocation sites (20 by default)
//   npm run bench:alloc -- --node-flags=--max-semi-space-size=64
//                                                Pinboard with these Node flags (comma-separated)
//   npm run bench:alloc -- --floor               the floor of `npm run bench -- --floors` instead
//   npm run bench:alloc -- --main=<dir>/dist/main.js
//                                                another build of Pinboard (an older commit's)
//
// The same layout as bench/proxy.ts: the load generator on core 0; redis-server, the worker
// and the profiled process on core 1. Prints bytes allocated per request by where the code
// comes from and the heaviest allocation sites, then the GC's pauses per 1,000 requests.
import WebSocket from "ws"
import { freePort } from "../test/support/Ports.js"
import { startRedisServer } from "../test/support/RedisServer.js"
import { flagArg, numberArg, textArg } from "./args.js"
import { measureHttp } from "./measure.js"
import { stopAll } from "./processes.js"
import { startProfiledRig } from "./profiledRig.js"
import { table } from "./proxyReport.js"

const CONNECTIONS = Math.round(numberArg("connections", 32))
const SECONDS = numberArg("seconds", 5)
const WARMUP_S = numberArg("warmup", 2)
const FLOOR = flagArg("floor")
const PATH = flagArg("large") ? "large" : "small"
const MAIN = textArg("main")
const NODE_FLAGS = textArg("node-flags")?.split(",").filter((flag) => flag !== "") ?? []
/** One sample per this many bytes allocated, on average. */
const SAMPLING_INTERVAL = 8192
/** How many of the heaviest allocation sites are printed. */
const SITES = Math.round(numberArg("sites", 20))

interface HeapNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly selfSize: number
  readonly children: ReadonlyArray<HeapNode>
}

/** One inspector session: a method call answers with its result. */
const inspector = async (port: number) => {
  const [target] = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{ webSocketDebuggerUrl: string }>
  const socket = new WebSocket(target!.webSocketDebuggerUrl)
  await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject))
  const waiting = new Map<number, (result: unknown) => void>()
  socket.on("message", (data: Buffer) => {
    const message = JSON.parse(data.toString()) as { id?: number; result?: unknown }
    if (message.id !== undefined) waiting.get(message.id)?.(message.result)
  })
  let next = 0
  return {
    call: <A>(method: string, params: object = {}): Promise<A> =>
      new Promise((resolve) => {
        const id = ++next
        waiting.set(id, resolve as (result: unknown) => void)
        socket.send(JSON.stringify({ id, method, params }))
      }),
    close: () => socket.close()
  }
}

/** Counts the process's GC pauses by kind from now on (perf_hooks), into `globalThis.__gcPauses`. */
const COUNT_GC = `(() => {
  const { PerformanceObserver, constants } = require("node:perf_hooks")
  const pauses = (globalThis.__gcPauses = { minor: [0, 0], major: [0, 0] })
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = entry.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR ? "major" : "minor"
      pauses[kind][0]++
      pauses[kind][1] += entry.duration
    }
  }).observe({ entryTypes: ["gc"] })
})()`

const categoryOf = (url: string): string => {
  if (url.includes("/node_modules/effect/")) return "Effect runtime"
  if (/\/node_modules\/(ioredis|redis-parser|denque|cluster-key-slot|standard-as-callback|@ioredis)\//.test(url)) return "ioredis"
  if (url.includes("/node_modules/undici/")) return "undici"
  if (url.includes("/dist/") && !url.includes("/node_modules/")) return "Pinboard's own code"
  if (url.startsWith("node:")) return "Node"
  return "other"
}

const where = ({ functionName, url, lineNumber }: HeapNode["callFrame"]): string =>
  `${functionName || "(anonymous)"}  ${url.replace(/^.*\/node_modules\//, "").replace(/^.*\/dist\//, "dist/")}:${lineNumber + 1}`

const redis = await startRedisServer()
try {
  const inspectPort = await freePort()
  const inspecting = [...NODE_FLAGS, `--inspect=127.0.0.1:${inspectPort}`]
  const { worker, profiled, registration, spec, watched } = await startProfiledRig(redis, {
    nodeFlags: inspecting,
    floor: FLOOR,
    main: MAIN,
    path: PATH,
    connections: CONNECTIONS,
    seconds: SECONDS,
    warmupSeconds: WARMUP_S
  })

  const session = await inspector(inspectPort)
  // First a window with the GC counted and nothing else: the heap profiler's samples are weak
  // handles that every scavenge visits, so its window's pauses are not the process's own.
  await session.call("Runtime.evaluate", { expression: COUNT_GC, includeCommandLineAPI: true })
  const plain = await measureHttp(profiled.proc.name, spec, watched, [worker, profiled.proc])
  const gc = await session.call<{ result: { value: { minor: [number, number]; major: [number, number] } } }>("Runtime.evaluate", {
    expression: "globalThis.__gcPauses",
    returnByValue: true
  })
  await session.call("HeapProfiler.enable")
  await session.call("HeapProfiler.startSampling", {
    samplingInterval: SAMPLING_INTERVAL,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true
  })
  const { result } = await measureHttp(profiled.proc.name, spec, watched, [worker, profiled.proc])
  const { profile } = await session.call<{ profile: { head: HeapNode } }>("HeapProfiler.stopSampling")
  session.close()
  registration.stop()

  const requests = result.perSecond * SECONDS
  const byCategory = new Map<string, number>()
  const bySite = new Map<string, number>()
  const walk = (node: HeapNode): void => {
    if (node.selfSize > 0) {
      const category = categoryOf(node.callFrame.url)
      byCategory.set(category, (byCategory.get(category) ?? 0) + node.selfSize)
      const site = where(node.callFrame)
      bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize)
    }
    for (const child of node.children) walk(child)
  }
  walk(profile.head)
  const total = [...byCategory.values()].reduce((sum, bytes) => sum + bytes, 0)
  const perRequest = (bytes: number) => Math.round(bytes / requests).toLocaleString("en-US")
  const plainRequests = plain.result.perSecond * SECONDS
  const cpuPerRequestUs = ((plain.cpu.proxy ?? 0) * 1e6) / plain.result.perSecond
  const { minor, major } = gc.result.value
  const per1000 = (count: number) => ((count * 1000) / plainRequests).toFixed(1)

  console.log("")
  console.log(
    `${PATH === "large" ? "64 KiB" : "64-byte"} GET, ${CONNECTIONS} connections${NODE_FLAGS.length > 0 ? `, ${NODE_FLAGS.join(" ")}` : ""}: ` +
      `${Math.round(plain.result.perSecond).toLocaleString("en-US")} req/s, p99 ${plain.result.p99.toFixed(2)} ms, ${profiled.proc.name} ${cpuPerRequestUs.toFixed(0)} µs CPU per request`
  )
  console.log(
    `GC: ${minor[0]} scavenges (${per1000(minor[0])} per 1,000 requests, ${minor[1].toFixed(0)} ms), ` +
      `${major[0]} mark-compacts (${per1000(major[0])} per 1,000 requests, ${major[1].toFixed(0)} ms): ` +
      `${(((minor[1] + major[1]) * 1000) / plainRequests).toFixed(0)} µs of pauses per request`
  )
  console.log("")
  console.log(`Then, with the heap profiler on (${Math.round(result.perSecond).toLocaleString("en-US")} req/s): ${perRequest(total)} bytes allocated per request`)
  console.log(table(["allocated by", "bytes/request"], [...byCategory].sort((a, b) => b[1] - a[1]).map(([category, bytes]) => [category, perRequest(bytes)])))
  console.log("")
  console.log(table(["heaviest allocation sites", "bytes/request"], [...bySite].sort((a, b) => b[1] - a[1]).slice(0, SITES).map(([site, bytes]) => [site, perRequest(bytes)])))
} finally {
  await stopAll()
  await redis.stop()
}
