// @ts-check
// Mutation testing of the pure core and the pipeline's steps: `npm run mutate`, or
// `npm run mutate -- --mutate src/Address.ts` for one file (docs/reliability.md
// "Mutation testing"). Not part of `npm test` nor of CI.

// `--mutate` on the command line replaces the list below. A narrowed run keeps its own
// incremental file, so it does not overwrite the full run's.
const at = process.argv.findIndex((arg) => arg === "--mutate" || arg === "-m")
const narrowed = at < 0 ? undefined : process.argv[at + 1]
const incrementalFile =
  narrowed === undefined
    ? "reports/mutation/incremental.json"
    : `reports/mutation/incremental-${narrowed.replace(/[^A-Za-z0-9]+/g, "_")}.json`

/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  packageManager: "npm",
  testRunner: "vitest",
  vitest: { configFile: "vitest.mutate.config.ts" },
  checkers: ["typescript"],
  tsconfigFile: "tsconfig.mutate.json",
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  coverageAnalysis: "perTest",
  // A static mutant (a module-level constant, a class declaration, the catalogue's rows) is
  // evaluated once at import, so Stryker would run every test file for it, each on a fresh
  // worker: minutes per mutant on two cores. They are reported as ignored; narrow a run and
  // set MUTATE_STATIC=1 to test them.
  ignoreStatic: process.env.MUTATE_STATIC !== "1",
  concurrency: 2,
  incremental: true,
  incrementalFile,
  mutate: [
    "src/Address.ts",
    "src/Errors.ts",
    "src/registry/Model.ts",
    "src/registry/BucketState.ts",
    "src/registry/Placement.ts",
    "src/registry/Hostnames.ts",
    "src/proxy/Headers.ts",
    "src/auth/Rules.ts",
    "src/auth/Attestation.ts",
    "src/pipeline/steps/*.ts",
    "src/contract/Epochs.ts"
  ],
  ignorePatterns: ["dist", "dist-bench", "reports", "test/e2e"],
  reporters: ["clear-text", "progress", "html", "json"],
  clearTextReporter: { reportTests: false, reportMutants: true, reportScoreTable: true },
  htmlReporter: { fileName: "reports/mutation/index.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  thresholds: { high: 85, low: 70, break: null },
  timeoutMS: 10_000,
  tempDirName: ".stryker-tmp"
}
