// The test set of `npm run mutate` (docs/reliability.md "Mutation testing"): the fast unit and
// pipeline tests that exercise the mutated files. Stryker mutates src/ in a sandbox, so tests
// of the built dist/ (test/e2e) would not see a mutant; cluster tests are too slow per mutant.
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: [
      "test/Address.test.ts",
      "test/auth/Attestation.test.ts",
      "test/auth/Rules.test.ts",
      "test/contract/Epochs.test.ts",
      "test/docs/ErrorsDoc.test.ts",
      "test/http/Respond.test.ts",
      "test/inspect/Explain.test.ts",
      "test/pipeline/*.test.ts",
      "test/proxy/Headers.test.ts",
      "test/registry/HostnameModel.test.ts",
      "test/registry/Hostnames.test.ts",
      "test/registry/Lifecycle.test.ts",
      "test/registry/MembershipView.test.ts",
      "test/registry/Placement.test.ts"
    ],
    testTimeout: 30_000,
    hookTimeout: 30_000
  }
})
