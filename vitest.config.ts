import { defineConfig } from "vitest/config"
import { scaled } from "./test/support/Time.js"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // PINBOARD_TEST_TIME_SCALE stretches these with every other real-time bound of the tests.
    testTimeout: scaled(30_000),
    hookTimeout: scaled(30_000)
  }
})
