// src/main.ts refuses an older Node.js with one line before anything else is loaded.
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { isSupportedNode, REQUIRED_NODE, unsupportedNodeMessage } from "../../src/cli/NodeVersion.js"

describe("the Node.js version check", () => {
  it("22.19 and every later version run; anything older does not", () => {
    for (const version of ["22.19.0", "22.19.1", "22.20.0", "22.100.0", "23.0.0", "24.21.0", "100.0.0", "v22.19.0"]) {
      expect(isSupportedNode(version), version).toBe(true)
    }
    for (const version of ["22.18.9", "22.9.0", "22.1.0", "21.99.0", "20.20.2", "18.0.0", "v20.20.2", "garbage"]) {
      expect(isSupportedNode(version), version).toBe(false)
    }
  })

  it("an older one is named with the version it needs, in one line", () => {
    expect(unsupportedNodeMessage("20.20.2")).toBe("Node.js 22.19 or newer is required (this is v20.20.2)")
    expect(unsupportedNodeMessage("22.19.0")).toBeUndefined()
    expect(unsupportedNodeMessage(process.versions.node)).toBeUndefined()
  })

  it("the version required is package.json's engines.node", () => {
    const { engines } = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { engines: { node: string } }
    expect(engines.node).toBe(`>=${REQUIRED_NODE.major}.${REQUIRED_NODE.minor}.0`)
  })
})
