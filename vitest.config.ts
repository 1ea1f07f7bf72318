import { availableParallelism } from "node:os"
import { defineConfig } from "vitest/config"
import { scaled } from "./test/support/Time.js"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Most files spend their time waiting on processes, sockets and leases, not on a core:
    // at least three run at once even on two cores (vitest would run one there).
    maxWorkers: Math.max(3, availableParallelism() - 1),
    // PINBOARD_TEST_TIME_SCALE stretches these with every other real-time bound of the tests.
    testTimeout: scaled(30_000),
    hookTimeout: scaled(30_000)
  }
})
