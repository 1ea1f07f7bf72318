// What bench/profile.ts and bench/allocations.ts measure on: one worker and one Pinboard on a
// redis-server (the servers' core), the ids placed, and the process under study started with
// the profiler's Node flags: that Pinboard, or the Effect floor beside it (`floor`). Warmed up
// by a run of its own, so that a window after it holds only the measured one.
import type { RedisServer } from "../test/support/RedisServer.js"
import { measureHttp } from "./measure.js"
import { pinPid, type Proc } from "./processes.js"
import { getLoad, LOAD_CORE, register, SERVER_CORE, startEffectFloor, startPinboard, startWorker, waitForPlacements, waitHealthy, type PinboardProc, type Registration } from "./proxyTargets.js"

export interface ProfiledRigOptions {
  /** Node flags of the process under study (the profiler's). */
  readonly nodeFlags: ReadonlyArray<string>
  readonly floor: boolean
  /** Another build's `dist/main.js`; this build's when undefined. */
  readonly main: string | undefined
  readonly path: string
  readonly connections: number
  readonly seconds: number
  readonly warmupSeconds: number
}

export interface ProfiledRig {
  readonly worker: Proc
  readonly profiled: PinboardProc
  readonly registration: Registration
  readonly spec: ReturnType<typeof getLoad>
  readonly watched: { readonly proxy: Array<number>; readonly worker: number; readonly redis: Array<number> }
}

export const startProfiledRig = async (redis: RedisServer, options: ProfiledRigOptions): Promise<ProfiledRig> => {
  pinPid(process.pid, LOAD_CORE)
  pinPid(redis.pid, SERVER_CORE)
  const { proc: worker, origin: workerOrigin } = await startWorker()
  const pinboard = await startPinboard("pinboard", { PINBOARD_REDIS_URL: redis.url }, options.floor ? [] : options.nodeFlags, options.main)
  await waitHealthy(pinboard)
  const registration = await register(pinboard.origin, workerOrigin)
  console.log(await waitForPlacements(pinboard.origin))
  // The floor exits on SIGTERM, as Pinboard does.
  const profiled = options.floor ? await startEffectFloor(workerOrigin, redis.port, options.nodeFlags) : pinboard
  const spec = getLoad(profiled.origin, options.path, options.connections, options.seconds)
  const watched = { proxy: [profiled.proc.pid], worker: worker.pid, redis: [redis.pid] }
  if (options.warmupSeconds > 0) await measureHttp(`${profiled.proc.name} (warm-up)`, { ...spec, seconds: options.warmupSeconds }, watched, [worker, profiled.proc])
  return { worker, profiled, registration, spec, watched }
}
