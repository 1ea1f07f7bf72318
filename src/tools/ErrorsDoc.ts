// Renders docs/errors.md from the catalogue in Errors.ts (docs/proxy.md).
import { catalogue, internalError, retryAfterSeconds, type Reply } from "../Errors.js"
import { metricsListenerAnswers, type ListenerAnswer } from "../http/MetricsServer.js"

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
    "",
    "## The metrics listener",
    "",
    "The listener on `metrics.port` ([operations.md](operations.md#metrics)) serves `GET /metrics` and the fleet page ([operations.md](operations.md#the-fleet-page)), and answers anything else itself:",
    "",
    "| Status | Body | Content type | Headers | When |",
    "|---|---|---|---|---|",
    ...Object.values(metricsListenerAnswers).map((answer: ListenerAnswer) => {
      const headers = answer.allow === undefined ? "" : `\`Allow: ${answer.allow}\``
      return `| ${answer.reply.status} | \`${answer.reply.body}\` | ${answer.reply.contentType} | ${headers} | ${answer.when} |`
    }),
    ""
  ].join("\n")
