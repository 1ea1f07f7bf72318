// The version in package.json, found beside the build (dist/cli/ or src/cli/ alike).
import { readFileSync } from "node:fs"

export const packageVersion = (): string =>
  (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version
