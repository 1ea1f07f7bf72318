// What `pinboard inspect` prints: text for people, JSON for programs (docs/inspect.md).
// Pure: reports in, strings out.
import type { AffinityKey } from "../Config.js"
import type { ListedWorker, NamespaceEntry, PlacementAnswer } from "./Answers.js"
import type { CallerStatus, Exclusion, PlacementOutcome, ResolveExplanation, WorkerVerdict } from "./Explain.js"

export interface WorkersReport {
  readonly pinboard: string
  readonly now: number
  readonly workers: ReadonlyArray<ListedWorker>
}

export interface IdReport {
  readonly pinboard: string
  readonly now: number
  readonly env: string
  /** `--host`, when given. */
  readonly hostname: string | undefined
  readonly namespace: string
  readonly id: string
  readonly bucket: number
  readonly buckets: number
  readonly placement: PlacementAnswer | undefined
  /** What Pinboard hashes for rendezvous (docs/config.md `affinity.key`). */
  readonly affinityKey: AffinityKey
  /** Whether --affinity was given; "" is used otherwise. */
  readonly affinityGiven: boolean
  readonly resolve: ResolveExplanation
}

const MEMBERSHIP = "bucket 0's copy of the membership"

// ---- JSON ---------------------------------------------------------------------------------------

export const workersJson = (report: WorkersReport): string =>
  JSON.stringify(
    {
      pinboard: report.pinboard,
      now: report.now,
      membership: MEMBERSHIP,
      workers: report.workers.map((w) => ({ ...w, leaseLeftMs: w.leaseExpiresAt - report.now }))
    },
    null,
    2
  )

export const idJson = (report: IdReport): string =>
  JSON.stringify(
    {
      pinboard: report.pinboard,
      now: report.now,
      namespace: report.namespace,
      id: report.id,
      env: report.env,
      hostname: report.hostname ?? null,
      bucket: report.bucket,
      buckets: report.buckets,
      placement: report.placement ?? null,
      affinityKey: affinityKeyText(report.affinityKey),
      membership: MEMBERSHIP,
      resolve: report.resolve
    },
    null,
    2
  )

// ---- text ---------------------------------------------------------------------------------------

export const workersText = (report: WorkersReport): string => {
  const { workers } = report
  if (workers.length === 0) return `Pinboard ${report.pinboard}: no workers registered (${MEMBERSHIP})`
  const lines = [
    `Pinboard ${report.pinboard}: ${workers.length} worker${workers.length === 1 ? "" : "s"} (${MEMBERSHIP})`,
    ...table([
      ["worker", "advertiseUrl", "namespaces", "lease left (s)", "headroom", "draining", "degraded", "nacks"],
      ...workers.map((w) => [
        w.worker,
        w.advertiseUrl,
        w.namespaces.map(namespaceEntryText).join(","),
        seconds(w.leaseExpiresAt - report.now),
        num(w.headroom),
        yesNo(w.draining),
        yesNo(w.degraded),
        String(w.nacks)
      ])
    ])
  ]
  if (workers.some((w) => w.leaseExpiresAt <= report.now)) {
    lines.push("A lease left of 0 or less has lapsed: the worker is listed until the sweep removes it.")
  }
  return lines.join("\n")
}

const forHostname = (report: IdReport): string => (report.hostname === undefined ? "" : ` for ${report.hostname}`)

export const idText = (report: IdReport): string => {
  const lines = [
    line("id", `${report.namespace}/${report.id} (env ${JSON.stringify(report.env)})`),
    line("bucket", `${report.bucket} of ${report.buckets}`),
    line("placement", report.placement === undefined ? "not placed" : placementText(report.placement, report.now))
  ]
  const { resolve } = report
  if (resolve._tag === "Forward") {
    lines.push(line("resolve", `forwarded to ${resolve.worker} at epoch ${resolve.epoch}`))
    return lines.join("\n")
  }
  const { outcome } = resolve
  lines.push(line("resolve", resolve.ended === null ? "a new placement" : "a new placement (the row has ended: a resolve deletes it first)"))
  if (outcome._tag === "NoWorkers") {
    const ns = report.namespace
    lines.push(line("workers", `none of ${ns}${forHostname(report)} in env ${JSON.stringify(report.env)} listed (${MEMBERSHIP})`))
    lines.push(line("result", `404 unknown namespace if ${ns} was never registered, else 503 no live backends for namespace`))
    return lines.join("\n")
  }
  const ownCopy = report.bucket === 0 ? "" : `; bucket ${report.bucket} holds its own, normally the same`
  lines.push(line("workers", `of ${report.namespace}${forHostname(report)} in env ${JSON.stringify(report.env)}, from ${MEMBERSHIP}${ownCopy}`))
  lines.push(...verdictTable(resolve.workers, resolve.minLeaseLeftMs).map((row) => `  ${row}`))
  lines.push(line("candidates", `lease left at least ${seconds(resolve.minLeaseLeftMs)} s, not draining, not degraded`))
  if (resolve.caller !== null) lines.push(line("caller", callerText(resolve.caller, outcome)))
  lines.push(...outcomeLines(outcome, resolve.affinity, report))
  return lines.join("\n")
}

const outcomeLines = (outcome: PlacementOutcome, affinity: string, report: IdReport): Array<string> => {
  if (outcome._tag === "NoWorkers") return []
  if (outcome._tag === "NoCandidates") return [line("result", "503 no live backends for namespace")]
  const preference = outcome.preferredBy === "caller"
    ? `${outcome.preferred}, the caller's worker`
    : `${outcome.preferred}, by rendezvous: greatest sha1(affinity + "\\n" + worker) for ${affinityText(affinity, report)}`
  const comparison = `${num(outcome.preferredHeadroom)} ${outcome.holds ? ">=" : "<"} ${num(outcome.threshold)} ` +
    `(mean ${num(outcome.meanHeadroom)} / balanceFactor ${num(outcome.balanceFactor)})`
  const coldStart = "unless the bucket is in cold start, which the API does not show"
  return [
    line("preferred", preference),
    line(
      "headroom",
      outcome.holds
        ? `${comparison}: the preference holds`
        : `${comparison}: two random candidates are drawn and the one with more headroom wins`
    ),
    line(
      "result",
      outcome.holds
        ? `placed on ${outcome.preferred} at a new epoch, ${coldStart}`
        : outcome.odds.length === 1
        ? `placed on ${outcome.odds[0]!.worker}, which wins whichever two are drawn, ${coldStart}`
        : `random: ${outcome.odds.map((o) => `${o.worker} ${percent(o.probability)}`).join(", ")}; ${coldStart}`
    )
  ]
}

const verdictTable = (workers: ReadonlyArray<WorkerVerdict>, minLeaseLeftMs: number): Array<string> => {
  const ranked = workers.filter((w) => w.exclusions.length === 0).sort((a, b) => (a.rendezvousScore > b.rendezvousScore ? -1 : 1))
  return table([
    ["worker", "headroom", "lease left (s)", "candidate", "rendezvous"],
    ...workers.map((w) => {
      const rank = ranked.indexOf(w)
      return [
        w.worker,
        num(w.headroom),
        seconds(w.leaseLeftMs),
        w.exclusions.length === 0 ? "yes" : `no: ${w.exclusions.map((e) => exclusionText(e, minLeaseLeftMs)).join(", ")}`,
        rank < 0 ? "" : `#${rank + 1} ${w.rendezvousScore.slice(0, 8)}`
      ]
    })
  ])
}

const callerText = (caller: { readonly worker: string; readonly status: CallerStatus }, outcome: PlacementOutcome): string => {
  const otherwise = outcome._tag === "Chosen" ? "rendezvous decides" : "no preference"
  switch (caller.status) {
    case "candidate":
      return `${caller.worker} is a candidate: it is preferred`
    case "not-candidate":
      return `${caller.worker} is not a candidate: ${otherwise}`
    case "not-listed":
      return `${caller.worker} does not serve this namespace: ${otherwise}`
  }
}

const placementText = (p: PlacementAnswer, now: number): string => {
  const state = p.live
    ? p.windDownAt === null ? "live" : `live, winding down until ${new Date(p.windDownAt).toISOString()}`
    : p.windDownAt !== null && p.windDownAt <= now
    ? "ended: its wind-down deadline passed"
    : "ended: its owner's lease lapsed, or the owner registered again"
  return `${p.worker}, epoch ${p.epoch}, placed ${new Date(p.placedAt).toISOString()} (${seconds(now - p.placedAt)} s ago), ` +
    `tag ${JSON.stringify(p.tag)}, ${state}`
}

const exclusionText = (exclusion: Exclusion, minLeaseLeftMs: number): string => {
  switch (exclusion) {
    case "lapsed":
      return "lease lapsed"
    case "lease-short":
      return `lease left below ${seconds(minLeaseLeftMs)} s`
    case "draining":
      return "draining"
    case "degraded":
      return "degraded"
  }
}

const affinityText = (affinity: string, report: IdReport): string =>
  report.affinityGiven
    ? `affinity ${JSON.stringify(affinity)}`
    : `affinity "" (the default here; Pinboard uses ${affinitySourceText(report.affinityKey)}: pass it with --affinity)`

const affinitySourceText = (key: AffinityKey): string => {
  switch (key._tag) {
    case "ip":
      return "the client IP"
    case "header":
      return `the ${key.name} header, else the client IP`
    case "cookie":
      return `the ${key.name} cookie, else the client IP`
  }
}

const affinityKeyText = (key: AffinityKey): string => (key._tag === "ip" ? "ip" : `${key._tag}:${key.name}`)

const namespaceEntryText = (entry: NamespaceEntry): string =>
  typeof entry === "string" ? entry : `${entry.namespace}@${entry.hostname}(env ${JSON.stringify(entry.env)})`

const line = (label: string, text: string): string => `${label.padEnd(11)} ${text}`
const seconds = (ms: number): string => (ms / 1000).toFixed(1)
const num = (n: number): string => String(Math.round(n * 1000) / 1000)
const percent = (p: number): string => `${Math.round(p * 1000) / 10}%`
const yesNo = (b: boolean): string => (b ? "yes" : "no")

/** Columns padded to their widest cell, two spaces apart. */
const table = (rows: ReadonlyArray<ReadonlyArray<string>>): Array<string> => {
  const widths: Array<number> = []
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)))
  return rows.map((row) => row.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd())
}
