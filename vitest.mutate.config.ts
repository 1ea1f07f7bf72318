// The test set of `npm run mutate` (docs/reliability.md "Mutation testing"): the fast unit
// tests of the mutated files. Stryker runs a mutant's covering test files on a fresh vitest
// worker each time, so a file that starts a server, a redis-server or the whole pipeline costs
// seconds per mutant; those (test/e2e, the Redis-backed registry tests, the pipeline harness)
// are left to `npm test`.
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: [
      "test/Address.test.ts",
      "test/Errors.test.ts",
      "test/auth/Attestation.test.ts",
      "test/auth/Rules.test.ts",
      "test/contract/Epochs.test.ts",
      "test/docs/ErrorsDoc.test.ts",
      "test/inspect/Explain.test.ts",
      "test/pipeline/Admission.test.ts",
      "test/pipeline/AfterStep.test.ts",
      "test/pipeline/HostnameBinding.test.ts",
      "test/pipeline/InflightCap.test.ts",
      "test/proxy/Headers.test.ts",
      "test/registry/Hostnames.test.ts",
      "test/registry/MembershipView.test.ts",
      "test/registry/Model.test.ts",
      "test/registry/Placement.test.ts"
    ],
    testTimeout: 30_000,
    hookTimeout: 30_000
  }
})
