// The oldest Node.js Pinboard runs on (package.json "engines"), checked by src/main.ts before
// anything else is loaded: on an older one, modules fail to load with a stack trace that does
// not say why. This module imports nothing, so that it loads on any Node.js.

/** package.json `engines.node`, `>=22.19.0`. */
export const REQUIRED_NODE = { major: 22, minor: 19 } as const

/** Whether `version` (`process.versions.node`, `22.19.0`; a leading `v` allowed) is at least REQUIRED_NODE. */
export const isSupportedNode = (version: string): boolean => {
  const [major = NaN, minor = NaN] = version.replace(/^v/, "").split(".").map(Number)
  return major > REQUIRED_NODE.major || (major === REQUIRED_NODE.major && minor >= REQUIRED_NODE.minor)
}

/** The line to print and exit with on an older Node.js, or undefined when this one will do. */
export const unsupportedNodeMessage = (version: string): string | undefined =>
  isSupportedNode(version)
    ? undefined
    : `Node.js ${REQUIRED_NODE.major}.${REQUIRED_NODE.minor} or newer is required (this is v${version.replace(/^v/, "")})`
