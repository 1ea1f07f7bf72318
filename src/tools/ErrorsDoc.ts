// Renders docs/errors.md from the catalogue in Errors.ts (DESIGN 9).
import { catalogue, internalError, retryAfterSeconds, type Reply } from "../Errors.js"

const row = (name: string, reply: Reply, when: string): string => {
  const headers = reply.retryAfterMs === undefined ? "" : `\`Retry-After: ${retryAfterSeconds(reply.retryAfterMs)}\``
  const body = reply.body === "" ? "(empty)" : `\`${reply.body}\``
  return `| ${name} | ${reply.status} | ${body} | ${reply.contentType ?? ""} | ${headers} | ${when} |`
}

export const renderErrorsDoc = (): string =>
  [
    "# Errors",
    "",
    "Every response Pinboard writes itself. Generated from `src/Errors.ts` by `npm run docs`; a test fails when this file is stale.",
    "",
    "| Error | Status | Body | Content type | Headers | When |",
    "|---|---|---|---|---|---|",
    ...catalogue.map(({ example, when }) => row(example._tag, example.reply, when)),
    row("(defect)", internalError, "Anything unhandled; logged with its cause."),
    ""
  ].join("\n")
