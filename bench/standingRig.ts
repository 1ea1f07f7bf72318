// A rig left running for outside tools (strace, perf, curl, wrk): redis-server, the worker,
// one Pinboard with the ids placed, and the Effect floor beside it (bench/undiciProxy.ts),
// each on the servers' core as in bench/proxy.ts. Prints each origin and pid, then waits for
// SIGINT or SIGTERM and stops them all.
//
//   node dist-bench/bench/standingRig.js [--main=<dir>/dist/main.js] [--node-flags=--trace-gc,...]
//                                        [--log-dir=<dir>]
// `--node-flags` go to Pinboard and the floor alike (comma-separated); `--log-dir` appends
// each one's output to <dir>/pinboard.log and <dir>/floor.log.
//
// Unlike bench/proxy.ts, Pinboard runs with its default lease (15 s, not 3 s) and this process
// (the heartbeats) is not pinned to the load core: a load run there from outside, or a tracer
// slowing Pinboard, would otherwise lose the lease and stall the run on the cold start.
import { appendFileSync } from "node:fs"
import { join } from "node:path"
import { freePort } from "../test/support/Ports.js"
import { startRedisServer } from "../test/support/RedisServer.js"
import { textArg } from "./args.js"
import { pinPid, spawnNode, stopAll, type Proc } from "./processes.js"
import { register, SERVER_CORE, startEffectFloor, startWorker, TOKEN, waitForPlacements, waitHealthy } from "./proxyTargets.js"

const MAIN = textArg("main") ?? new URL("../../dist/main.js", import.meta.url).pathname
const NODE_FLAGS = textArg("node-flags")?.split(",").filter((flag) => flag !== "") ?? []
const LOG_DIR = textArg("log-dir")
const LEASE_MS = 15_000

const logTo = (proc: Proc, file: string): void => {
  if (LOG_DIR !== undefined) proc.onLine((line) => appendFileSync(join(LOG_DIR, file), `${line}\n`))
}

const redis = await startRedisServer()
pinPid(redis.pid, SERVER_CORE)
const { proc: worker, origin: workerOrigin } = await startWorker()
const port = await freePort()
const env = {
  ...process.env,
  PINBOARD_REDIS_URL: redis.url,
  PINBOARD_TOKEN: TOKEN,
  PINBOARD_PORT: String(port),
  PINBOARD_HOST: "127.0.0.1",
  PINBOARD_LEASE_MS: String(LEASE_MS)
}
const pinboard = { proc: spawnNode("pinboard", SERVER_CORE, MAIN, [], env, NODE_FLAGS), origin: `http://127.0.0.1:${port}` }
logTo(pinboard.proc, "pinboard.log")
await waitHealthy(pinboard)
const registration = await register(pinboard.origin, workerOrigin)
console.log(await waitForPlacements(pinboard.origin))
const floor = await startEffectFloor(workerOrigin, redis.port, NODE_FLAGS)
logTo(floor.proc, "floor.log")
console.log(`redis pid ${redis.pid}`)
console.log(`worker ${workerOrigin} pid ${worker.pid}`)
console.log(`pinboard ${pinboard.origin} pid ${pinboard.proc.pid}`)
console.log(`floor ${floor.origin} pid ${floor.proc.pid}`)
console.log("ready")

const stop = async () => {
  registration.stop()
  await stopAll()
  await redis.stop()
  process.exit(0)
}
process.once("SIGINT", () => void stop())
process.once("SIGTERM", () => void stop())
