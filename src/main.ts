#!/usr/bin/env node
// Pinboard's entry point (package.json "bin" and "main"): on a Node.js older than the one it needs,
// one line and exit code 2, before any module that might not load there (static imports are loaded
// first, so the program is imported only after the check); else the program, src/cli/Main.ts.
import { unsupportedNodeMessage } from "./cli/NodeVersion.js"

const unsupported = unsupportedNodeMessage(process.versions.node)
if (unsupported === undefined) {
  await import("./cli/Main.js")
} else {
  process.stderr.write(`pinboard: ${unsupported}\n`)
  process.exitCode = 2
}
