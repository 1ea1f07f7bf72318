// Runs `pinboard inspect` as the built binary does (docs/inspect.md), for the end-to-end tests.
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"

const MAIN = new URL("../../dist/main.js", import.meta.url).pathname

export interface InspectRun {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** `node dist/main.js inspect ...args` with only the given PINBOARD_* variables. */
export const runInspect = (args: ReadonlyArray<string>, env: Record<string, string>): Promise<InspectRun> => {
  if (!existsSync(MAIN)) throw new Error("dist/main.js is missing: run `npm run build` before the end-to-end tests")
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("PINBOARD_")))
  const child = spawn(process.execPath, [MAIN, "inspect", ...args], { env: { ...clean, ...env }, stdio: ["ignore", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })))
}
