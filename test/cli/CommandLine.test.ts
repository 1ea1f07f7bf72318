// docs/config.md "Command line": a command, then flags; anything unknown is a usage error.
import { describe, expect, it } from "vitest"
import { Result } from "effect"
import { parseCommandLine } from "../../src/cli/CommandLine.js"

const parsed = (...argv: Array<string>) => Result.getOrThrow(parseCommandLine(argv))
const usage = (...argv: Array<string>) => Result.match(parseCommandLine(argv), { onFailure: (e) => e.message, onSuccess: (c) => `parsed ${c._tag}` })

describe("the command line", () => {
  it("no command serves; serve and config take the common flags, in either spelling", () => {
    expect(parsed()).toStrictEqual({ _tag: "Serve", flags: { config: undefined, port: undefined, host: undefined, redisUrl: undefined } })
    expect(parsed("serve", "--port", "9999", "--host=127.0.0.1", "--redis-url", "redis://r:6379", "--config", "p.json")).toStrictEqual({
      _tag: "Serve",
      flags: { config: "p.json", port: "9999", host: "127.0.0.1", redisUrl: "redis://r:6379" }
    })
    expect(parsed("--port", "1", "config")).toStrictEqual({ _tag: "Config", flags: { config: undefined, port: "1", host: undefined, redisUrl: undefined } })
  })

  it("help and version win over everything else", () => {
    for (const argv of [["--help"], ["-h"], ["help"], ["serve", "--help"], ["--port", "1", "-h"]]) expect(parsed(...argv)._tag).toBe("Help")
    for (const argv of [["--version"], ["-V"], ["config", "--version"]]) expect(parsed(...argv)._tag).toBe("Version")
  })

  it("inspect hands everything after it to its own parser", () => {
    expect(parsed("inspect", "id", "threads", "t1", "--json")).toStrictEqual({ _tag: "Inspect", argv: ["id", "threads", "t1", "--json"] })
    expect(usage("--port", "1", "inspect")).toBe("inspect comes first: pinboard inspect ...")
  })

  it("an unknown flag or command, a missing value or an extra argument is a usage error", () => {
    expect(usage("--bogus")).toBe("Unknown option '--bogus'.")
    expect(usage("-x")).toBe("Unknown option '-x'.")
    expect(usage("--port")).toBe("Option '--port <value>' argument missing")
    expect(usage("--config", "--port", "1")).toBe("Option '--config' argument is ambiguous.")
    expect(usage("--port=")).toBe("--port: expected a value")
    expect(usage("--config=")).toBe("--config: expected a value")
    expect(usage("start")).toBe(`unknown command "start": expected one of serve, config, inspect, help`)
    expect(usage("serve", "now")).toBe(`unexpected argument "now"`)
    expect(usage("--help=yes")).toMatch(/^Option '-h, --help' does not take an argument/)
  })
})
