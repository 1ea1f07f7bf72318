// Pinboard in-process for a test: its layers (App.ts) over the registry chosen by the config
// (embedded unless `redis.url` is set), on a free loopback port, stopped by interrupting it.
import { Effect, Exit, Fiber, Layer, References } from "effect"
import { appLayer } from "../../src/App.js"
import type { PinboardConfig } from "../../src/Config.js"
import { freePort } from "./Ports.js"
import { configForTests } from "./TestConfig.js"
import { poll, scaled } from "./Time.js"

export interface TestPinboard {
  readonly url: string
  readonly port: number
  readonly config: PinboardConfig
  readonly stop: () => Promise<void>
}

const healthy = async (url: string): Promise<boolean> => {
  try {
    const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(scaled(1000)) })
    await response.arrayBuffer()
    return response.status === 200
  } catch {
    return false
  }
}

/** Starts Pinboard and resolves once `/healthz` answers 200. */
export const startPinboard = async (overrides: Partial<PinboardConfig> = {}): Promise<TestPinboard> => {
  const port = await freePort()
  const config = configForTests({ ...overrides, port, host: "127.0.0.1" })
  const app = appLayer(config)
  // Errors (a 500's "unhandled error") still show; start-up chatter does not.
  const fiber = Effect.runFork(Layer.launch(app).pipe(Effect.provideService(References.MinimumLogLevel, "Error")))
  const url = `http://127.0.0.1:${port}`
  const stop = async () => {
    await Effect.runPromise(Fiber.interrupt(fiber))
  }

  try {
    await poll(
      async () => {
        const exit = fiber.pollUnsafe()
        if (exit !== undefined) throw new Error(`pinboard stopped during start-up: ${Exit.isFailure(exit) ? String(exit.cause) : "exited"}`)
        return healthy(url)
      },
      { timeoutMs: 10_000, reason: `/healthz 200 on ${url}` }
    )
  } catch (error) {
    await stop()
    throw error
  }
  return { url, port, config, stop }
}
