import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { renderErrorsDoc } from "../../src/tools/ErrorsDoc.js"

describe("docs/errors.md", () => {
  it("matches the catalogue (run `npm run docs` after changing src/Errors.ts)", () => {
    expect(readFileSync(new URL("../../docs/errors.md", import.meta.url), "utf8")).toBe(renderErrorsDoc())
  })
})
