// `npm run fuzz`: bounded fuzzing of Pinboard, the built binary on a real redis-server, with
// two fixture workers behind it (docs/reliability.md "Fuzzing").
//
//   npm run fuzz                                  100,000 inputs, seed 1, 32 in flight
//   npm run fuzz -- --inputs 20000 --seed 7       fewer inputs, another seed
//   npm run fuzz -- --seconds 120                 stop generating after 120 s
//   npm run fuzz -- --only jws,registry           some categories only
//   npm run fuzz -- --replay 1234 --verbose       one input of the seed, with what came back
//
// Inputs come from a seeded PRNG across ten categories (reliability/fuzz/*.ts): request lines,
// paths and ids, headers, bodies, registry API bodies, JWS credentials, attestation, clients
// that stop part-way, WebSocket upgrades, and byte mutations of well-formed requests. Malformed
// HTTP goes over raw sockets, well-formed requests through node:http on keep-alive
// connections. Every answer is classified: a catalogue row of docs/errors.md, a registry or
// probe answer, a Node HTTP-layer rejection, a bare upgrade status line, or the worker's own
// answer relayed; many inputs also know the exact answer they must get (the check order of
// the seed, the rules of the fuzz config) and check it, the worker's echo included.
//
// Every 200 inputs a control sequence (well-formed requests with exact expected answers) runs
// in between the fuzz traffic, Pinboard's pid is checked and /healthz asked. Pinboard's RSS
// and open descriptors are sampled. The run prints its figures and a PASS/FAIL line; it exits
// non-zero only when something is broken: a crash, a 500, a defect logged, an unclassified or
// wrong answer, a hang, a failed control request, memory or descriptors beyond their bounds.
import { createHash } from "node:crypto"
import type { Classified } from "./fuzz/catalogue.js"
import { loadCatalogue, makeClassifier } from "./fuzz/catalogue.js"
import { attestationInput, jwsInput } from "./fuzz/auth.js"
import { CATEGORIES, initIdPool, requestBytes, type Category, type Input, type World } from "./fuzz/common.js"
import { runControls, type ControlResult } from "./fuzz/controls.js"
import { rssKiB } from "../bench/processes.js"
import { fdCounts, LEASE_MS, socketPeers, startFleet, stopAllSync, TOKEN, type Fleet } from "./fuzz/fleet.js"
import { isAlive } from "../test/support/Processes.js"
import {
  bodyInput,
  headersInput,
  mutationInput,
  pathInput,
  requestLineInput,
  stopInput,
  websocketInput
} from "./fuzz/http.js"
import { Rng } from "./prng.js"
import { registryInput } from "./fuzz/registry.js"
import { agent, sendHttp, sendRaw, type Observation, type RawObservation } from "./fuzz/wire.js"

// ---- options ------------------------------------------------------------------------------------

const argv = process.argv.slice(2)
const option = (name: string): string | undefined => {
  const i = argv.findIndex((a) => a === `--${name}` || a.startsWith(`--${name}=`))
  if (i < 0) return undefined
  const arg = argv[i]!
  return arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : argv[i + 1]
}
const numberOption = (name: string, fallback: number): number => {
  const raw = option(name)
  if (raw === undefined) return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value < 0) throw new Error(`--${name} expects a number, got ${raw}`)
  return value
}
const INPUTS = Math.floor(numberOption("inputs", 100_000))
const SEED = Math.floor(numberOption("seed", 1))
const SECONDS = numberOption("seconds", 480)
const CONCURRENCY = Math.max(1, Math.floor(numberOption("concurrency", 32)))
const REPLAY = option("replay") === undefined ? undefined : Math.floor(numberOption("replay", 0))
const VERBOSE = argv.includes("--verbose")
const ONLY = option("only")?.split(",").filter((c) => c !== "") as Array<Category> | undefined
for (const c of ONLY ?? []) if (!(CATEGORIES as ReadonlyArray<string>).includes(c)) throw new Error(`--only: unknown category ${c} (${CATEGORIES.join(", ")})`)

/** Whatever happens, the process ends (and every child with it) this long after it starts. */
const HARD_LIMIT_MS = Math.min(590_000, (SECONDS + 100) * 1000)
/** A request Pinboard neither answered nor closed within this: a hang. */
const HANG_MS = 10_000
/** Raw inputs: quiet this long with no answer, the client half-closes (the request may be incomplete). */
const FIN_AFTER_MS = 1000
const CONTROL_EVERY = 200
const WARMUP_INPUTS = 3000
/**
 * Memory bound: the end RSS may exceed the warm-up RSS by at most this. Node's heap grows
 * after warm-up (V8 enlarges its young and old spaces under load, undici keeps its pools)
 * and a 100,000-input run with 32 in flight holds at most a few hundred requests at once;
 * a leak of even 1 KiB per input would add ~100 MiB. 2x the warm-up or +100 MiB, whichever
 * is larger, passes the first and fails the second.
 */
const rssBoundKiB = (warmupKiB: number): number => Math.max(2 * warmupKiB, warmupKiB + 100 * 1024)
/** Descriptors after the run and a settle period may exceed the baseline by at most this. */
const FD_SLACK = 16
const SETTLE_MS = 20_000

// ---- categories ---------------------------------------------------------------------------------

const GENERATORS: Record<Category, readonly [number, (rng: Rng, world: World) => Input]> = {
  "request-line": [11, requestLineInput],
  path: [12, pathInput],
  headers: [12, headersInput],
  body: [8, bodyInput],
  registry: [14, registryInput],
  jws: [12, jwsInput],
  attestation: [9, attestationInput],
  stop: [8, stopInput],
  websocket: [6, websocketInput],
  mutation: [8, mutationInput]
}

const inputRng = (seed: number, index: number): Rng => {
  const digest = createHash("sha256").update(`${seed}:${index}`).digest()
  return new Rng(digest.readUInt32LE(0))
}

const makeInput = (seed: number, index: number, world: World): Input => {
  const rng = inputRng(seed, index)
  const entries = (ONLY ?? CATEGORIES).map((c) => [GENERATORS[c][0], c] as const)
  const category = rng.weighted(entries)
  return GENERATORS[category][1](rng, world)
}

// ---- figures --------------------------------------------------------------------------------------

interface Failure {
  readonly index: number
  readonly category: string
  readonly variant: string
  readonly what: string
  readonly input: string
}

const stats = {
  inputs: 0,
  warmupInputs: 0,
  byCategory: new Map<string, number>(),
  byVariant: new Map<string, number>(),
  byStatus: new Map<string, number>(),
  byLabel: new Map<string, number>(),
  noAnswer: new Map<string, number>(),
  closedExamples: [] as Array<string>,
  fiveHundreds: [] as Array<Failure>,
  unclassified: [] as Array<Failure>,
  wrong: [] as Array<Failure>,
  hangs: [] as Array<Failure>,
  garbage: [] as Array<Failure>,
  sendErrors: 0,
  retries: 0,
  controls: 0,
  controlFailures: [] as Array<string>,
  healthChecks: 0,
  defects: [] as Array<string>,
  warnings: new Map<string, number>(),
  /** Per worker: lease losses and other notes. */
  workerNotes: new Map<string, number>(),
  pinboardLines: 0,
  crashed: undefined as string | undefined,
  rss: [] as Array<{ readonly atMs: number; readonly inputs: number; readonly kib: number }>,
  fds: [] as Array<{ readonly atMs: number; readonly fds: number; readonly sockets: number }>
}
const bump = (map: Map<string, number>, key: string, by = 1) => map.set(key, (map.get(key) ?? 0) + by)

const describeInput = (input: Input): string => {
  const send = input.send
  if (send.kind === "http") {
    const r = send.request
    const text = requestBytes({ method: r.method, target: r.path, headers: r.headers, ...(r.body === undefined ? {} : { body: r.body }) }).toString("latin1")
    return JSON.stringify(text.length > 600 ? `${text.slice(0, 600)}…(${text.length} bytes)` : text)
  }
  const bytes = Buffer.concat(send.parts.map((p) => p.data)).toString("latin1")
  const after = send.after.mode === "ws" ? `ws ${JSON.stringify(send.after.ws)}` : JSON.stringify(send.after)
  return `${JSON.stringify(bytes.length > 600 ? `${bytes.slice(0, 600)}…(${bytes.length} bytes)` : bytes)} then ${after}`
}

const KEEP = 12
const record = (list: Array<Failure>, failure: Failure) => {
  list.push(failure)
  if (list.length <= 3) console.log(`  ! ${failure.category}/${failure.variant} #${failure.index}: ${failure.what}\n    input: ${failure.input.slice(0, 400)}`)
}

// ---- one input ----------------------------------------------------------------------------------

const isRetryable = (observation: Observation): boolean =>
  observation.responses.length === 0 && observation.sendError !== undefined && /socket hang up|ECONNRESET/.test(observation.sendError)

const send = async (input: Input, port: number): Promise<Observation> => {
  const s = input.send
  if (s.kind === "raw") {
    return sendRaw({
      port,
      parts: s.parts,
      after: s.after,
      headRequest: s.headRequest,
      finAfterMs: FIN_AFTER_MS,
      hangMs: HANG_MS,
      ...(s.pauseReadingMs === undefined ? {} : { pauseReadingMs: s.pauseReadingMs })
    })
  }
  const first = await sendHttp(port, s.request, HANG_MS)
  // A keep-alive connection the server closed as idle just as it was reused: once more, fresh.
  if (isRetryable(first)) {
    stats.retries++
    return sendHttp(port, s.request, HANG_MS, true)
  }
  return first
}

const runOne = async (index: number, world: World, classify: ReturnType<typeof makeClassifier>, counted: boolean): Promise<void> => {
  const input = makeInput(SEED, index, world)
  const observation = await send(input, world.port)
  const classified: Array<Classified> = observation.responses.map((r) => classify(r, input.context))
  input.learn?.(observation)
  if (!counted) {
    stats.warmupInputs++
  } else {
    stats.inputs++
    bump(stats.byCategory, input.category)
    bump(stats.byVariant, `${input.category}/${input.variant}`)
  }
  const failure = (what: string): Failure => ({ index, category: input.category, variant: input.variant, what, input: describeInput(input) })
  const first = observation.responses[0]
  if (counted) {
    if (first !== undefined) {
      bump(stats.byStatus, String(first.status))
      bump(stats.byLabel, classified[0]!.kind === "catalogue" ? classified[0]!.label : classified[0]!.kind === "worker" ? "worker (relayed)" : classified[0]!.label)
    } else {
      const why = observation.hung
        ? "hang"
        : observation.sendError !== undefined
        ? "closed or reset before an answer"
        : input.send.kind === "raw" && input.send.after.mode !== "read" && input.send.after.mode !== "ws"
        ? "client stopped first"
        : observation.finSent
        ? "incomplete request, closed after the client's FIN"
        : input.send.kind === "raw" && input.send.parts[0]?.data.subarray(0, 8).toString("latin1") === "CONNECT "
        ? "CONNECT: node:http closes (no 'connect' listener)"
        : "closed without an answer"
      bump(stats.noAnswer, `${why} (${input.category})`)
      if (why === "closed without an answer" && stats.closedExamples.length < 5) stats.closedExamples.push(describeInput(input).slice(0, 160))
    }
  }
  if (observation.sendError !== undefined && !/socket hang up|ECONNRESET|EPIPE/.test(observation.sendError)) stats.sendErrors++
  for (const [i, response] of observation.responses.entries()) {
    if (response.status === 500) record(stats.fiveHundreds, failure(`a 500 (${JSON.stringify(response.body.toString("latin1").slice(0, 200))})`))
    const c = classified[i]!
    if (c.kind === "unknown") record(stats.unclassified, failure(`unclassified answer: ${c.why ?? c.label}`))
  }
  const garbage = (observation as RawObservation).garbage
  if (garbage !== undefined) record(stats.garbage, failure(`unparsable bytes after ${observation.responses.length} answer(s): ${garbage}`))
  if (observation.hung) record(stats.hangs, failure(`no answer nor close within ${HANG_MS / 1000} s${observation.finSent ? " (after the client's FIN)" : ""}`))
  const problem = input.expect?.(observation, classified)
  if (problem !== undefined) record(stats.wrong, failure(problem))
  if (VERBOSE) {
    console.log(`#${index} ${input.category}/${input.variant}: ${describeInput(input)}`)
    for (const [i, r] of observation.responses.entries()) {
      console.log(`  -> ${r.status} [${classified[i]!.label}] ${JSON.stringify(r.headers)} ${JSON.stringify(r.body.subarray(0, 300).toString("latin1"))}`)
    }
    console.log(`  closed=${observation.closed} hung=${observation.hung} fin=${observation.finSent} sendError=${observation.sendError ?? "-"} problem=${problem ?? "-"}`)
  }
}

// ---- the run --------------------------------------------------------------------------------------

let fleet: Fleet | undefined
const started = performance.now()
const elapsed = () => performance.now() - started
const mib = (kib: number) => (kib / 1024).toFixed(1)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The level and message of one of Pinboard's JSON log lines (docs/operations.md); undefined for anything else. */
const logLineOf = (line: string): { readonly level: string; readonly message: string } | undefined => {
  try {
    const parsed = JSON.parse(line) as { level?: unknown; message?: unknown }
    return typeof parsed.level === "string" && typeof parsed.message === "string" ? { level: parsed.level, message: parsed.message } : undefined
  } catch {
    return undefined
  }
}

/** A defect is logged at error as "unhandled error"; anything Node prints itself is not JSON. */
const onPinboardLine = (line: string) => {
  stats.pinboardLines++
  const logged = logLineOf(line)
  if (logged?.level === "error" || (logged === undefined && /Uncaught|Error/.test(line))) {
    if (stats.defects.length < 50) stats.defects.push(line.slice(0, 2000))
  } else if (logged?.level === "warning" || (logged === undefined && /Warning:/.test(line))) {
    bump(stats.warnings, (logged?.message ?? line).replace(/\d+/g, "N").slice(0, 120))
  }
}

const onWorkerLine = (worker: string, line: string) => {
  const note = /lease lost|registered again|registry call failed|heartbeat answered|handler failed/.test(line)
    ? `${worker}: ${line.replace(/[0-9]{3,}/g, "N").slice(0, 80)}`
    : undefined
  if (note !== undefined) bump(stats.workerNotes, note)
}

const sampleProcess = (pid: number, inputs: number) => {
  const kib = rssKiB(pid)
  if (kib !== undefined) stats.rss.push({ atMs: elapsed(), inputs, kib })
  const fds = fdCounts(pid)
  if (fds !== undefined) stats.fds.push({ atMs: elapsed(), ...fds })
}

const checkAlive = async (f: Fleet): Promise<boolean> => {
  if (f.pinboard.exit !== undefined || !isAlive(f.pinboard.pid)) {
    stats.crashed ??= `pinboard exited (${JSON.stringify(f.pinboard.exit)}); last lines:\n${f.pinboard.lines.slice(-30).join("\n")}`
    return false
  }
  return true
}

const recordControl = (result: ControlResult) => {
  stats.controls += result.sent
  stats.healthChecks += result.healthChecks
  for (const failure of result.failures) {
    stats.controlFailures.push(`after ${stats.inputs} inputs: ${failure}`)
    if (stats.controlFailures.length <= 3) console.log(`  ! control: ${failure}`)
  }
}

/** Polls until a request to a fresh id of every bucket answers 200: the registry's cold start is over. */
const waitForColdStart = async (world: World) => {
  const deadline = performance.now() + 30_000
  const rng = new Rng(SEED ^ 0x5eed)
  for (;;) {
    const ids = Array.from({ length: 64 }, (_, i) => `warm-${i}-${rng.chars(6, "abcdefghij")}`)
    const answers = await Promise.all(
      ids.map((id) => sendHttp(world.port, { method: "GET", path: `/open/${id}/echo`, headers: [] }, HANG_MS).then((o) => o.responses[0]?.status))
    )
    if (answers.every((s) => s === 200)) return
    if (performance.now() > deadline) throw new Error(`the registry's cold start did not end: ${answers.join(",")}`)
    await sleep(LEASE_MS / 4)
  }
}

const placeControls = async (world: World) => {
  const placed = []
  for (const namespace of ["/open", "/opt"]) {
    for (let i = 0; i < 8; i++) {
      const id = `ctl-${namespace.slice(1)}-${i}`
      const answer = await sendHttp(world.port, { method: "GET", path: `${namespace}/${id}/echo`, headers: [] }, HANG_MS)
      if (answer.responses[0]?.status !== 200) throw new Error(`control instance ${namespace}/${id}: ${answer.responses[0]?.status}`)
      const view = await sendHttp(
        world.port,
        { method: "GET", path: `/registry/placements/${namespace.slice(1)}/${id}`, headers: [["Authorization", `Bearer ${TOKEN}`]] },
        HANG_MS
      )
      const json = JSON.parse(view.responses[0]?.body.toString() ?? "{}") as { worker?: string; epoch?: string; live?: boolean }
      if (json.worker === undefined || json.epoch === undefined || json.live !== true) throw new Error(`no live placement for ${namespace}/${id}`)
      placed.push({ namespace, id, worker: json.worker, epoch: json.epoch })
    }
  }
  world.placed = placed
}

const pool = async (from: number, to: number, world: World, classify: ReturnType<typeof makeClassifier>, counted: boolean, deadline: number) => {
  let next = from
  let stopped = false
  const slot = async () => {
    while (!stopped) {
      if (performance.now() > deadline) {
        stopped = true
        return
      }
      const index = next++
      if (index >= to) return
      if (counted && index > from && (index - from) % CONTROL_EVERY === 0) {
        recordControl(await runControls(world, (index - from) / CONTROL_EVERY))
        if (!(await checkAlive(fleet!))) {
          stopped = true
          return
        }
      }
      await runOne(index, world, classify, counted)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, slot))
}

const percentile = (samples: ReadonlyArray<{ inputs: number; kib: number }>, fraction: number) =>
  samples.find((s) => s.inputs >= fraction * INPUTS) ?? samples[samples.length - 1]

const report = (phase: { peersBaseline?: Map<string, number>; peersSettled?: Map<string, number>; warmupKiB: number; fdBaseline: { fds: number; sockets: number } | undefined; settled: { fds: number; sockets: number } | undefined; endKiB: number | undefined; durationMs: number; stoppedByCap: boolean }) => {
  const lines: Array<string> = []
  const out = (s = "") => lines.push(s)
  const table = (map: Map<string, number>, indent = "  ") =>
    [...map.entries()].sort((a, b) => b[1] - a[1]).forEach(([k, v]) => out(`${indent}${k.padEnd(44)} ${String(v).padStart(7)}`))
  out()
  out(`Pinboard fuzz: seed ${SEED}, ${stats.inputs} inputs (${stats.warmupInputs} warm-up inputs before them), ${CONCURRENCY} in flight`)
  if (phase.stoppedByCap) out(`  (the --seconds cap of ${SECONDS} s stopped the run before ${INPUTS} inputs)`)
  out()
  out("inputs by category:")
  for (const c of CATEGORIES) {
    if (!stats.byCategory.has(c)) continue
    out(`  ${c.padEnd(44)} ${String(stats.byCategory.get(c)).padStart(7)}`)
    const variants = [...stats.byVariant.entries()]
      .filter(([k]) => k.startsWith(`${c}/`))
      .map(([k, v]) => [k.slice(c.length + 1).split(":")[0]!.replace(/ \(stops at once\)$/, ""), v] as const)
    const merged = new Map<string, number>()
    for (const [k, v] of variants) merged.set(k, (merged.get(k) ?? 0) + v)
    const top = [...merged.entries()].sort((a, b) => b[1] - a[1])
    const text = top.slice(0, 14).map(([k, v]) => `${k} ${v}`).join(", ")
    out(`      ${text}${top.length > 14 ? `, … (${top.length} variants)` : ""}`)
  }
  out()
  out("first answer by status:")
  table(new Map([...stats.byStatus.entries()].map(([k, v]) => [k, v])))
  out()
  out("first answer by kind (catalogue rows by name):")
  table(stats.byLabel)
  out()
  out("inputs without an answer:")
  table(stats.noAnswer)
  if (stats.closedExamples.length > 0) out(`  closed without an answer, e.g.: ${stats.closedExamples.join("; ")}`)
  out()
  const fiveHundreds = stats.fiveHundreds.length
  const firstRss = stats.rss[0]
  const peakKiB = stats.rss.reduce((m, s) => Math.max(m, s.kib), 0)
  const bound = rssBoundKiB(phase.warmupKiB)
  const rssOk = phase.endKiB !== undefined && phase.endKiB <= bound
  const fdPeak = stats.fds.reduce((m, s) => Math.max(m, s.fds), 0)
  const fdOk = phase.fdBaseline !== undefined && phase.settled !== undefined && phase.settled.fds <= phase.fdBaseline.fds + FD_SLACK
  const marks = [0.25, 0.5, 0.75].map((f) => percentile(stats.rss, f))
  out(`crashes:                         ${stats.crashed === undefined ? 0 : 1}   (pid checked and /healthz asked ${stats.healthChecks} times)`)
  out(`500s:                            ${fiveHundreds}`)
  out(`defects logged by Pinboard:      ${stats.defects.length}`)
  out(`unclassified answers:            ${stats.unclassified.length}`)
  out(`unparsable answers:              ${stats.garbage.length}`)
  out(`wrong answers (exact checks):    ${stats.wrong.length}`)
  out(`hangs (>${HANG_MS / 1000} s, no answer nor close): ${stats.hangs.length}`)
  out(`control requests:                ${stats.controls} sent, ${stats.controlFailures.length} wrong`)
  out(`keep-alive retries (idle close): ${stats.retries}`)
  for (const w of fleet?.workers ?? []) {
    out(`worker ${w.id}: ${w.exit === undefined ? "alive" : `EXITED ${JSON.stringify(w.exit)}`}`)
  }
  if (stats.workerNotes.size > 0) table(stats.workerNotes)
  out()
  out(
    `RSS (MiB): warm-up ${mib(phase.warmupKiB)}, ` +
      marks.map((m, i) => `${[25, 50, 75][i]}% ${m === undefined ? "-" : mib(m.kib)}`).join(", ") +
      `, end ${phase.endKiB === undefined ? "-" : mib(phase.endKiB)}, peak ${mib(peakKiB)}; bound ${mib(bound)} (max of 2x warm-up, warm-up + 100)`
  )
  if (firstRss !== undefined) out(`  samples (inputs: MiB): ${stats.rss.map((r) => `${r.inputs}: ${mib(r.kib)}`).join(", ")}`)
  out(
    `open descriptors: baseline ${phase.fdBaseline?.fds ?? "-"} (${phase.fdBaseline?.sockets ?? "-"} sockets), peak ${fdPeak}, ` +
      `after settling (back at the baseline, or ${SETTLE_MS / 1000} s) ${phase.settled?.fds ?? "-"} (${phase.settled?.sockets ?? "-"} sockets); bound baseline + ${FD_SLACK}`
  )
  const describePeers = (peers: Map<string, number> | undefined) =>
    peers === undefined ? "-" : [...peers.entries()].map(([k, v]) => `${v} ${k}`).join(", ")
  out(`  sockets at baseline: ${describePeers(phase.peersBaseline)}`)
  out(`  sockets after settle: ${describePeers(phase.peersSettled)}`)
  out(`duration: ${(phase.durationMs / 1000).toFixed(1)} s of fuzzing (${((stats.inputs / phase.durationMs) * 1000).toFixed(0)} inputs/s), ${(elapsed() / 1000).toFixed(1)} s in all`)
  const lists: Array<[string, Array<Failure>]> = [
    ["500s", stats.fiveHundreds],
    ["unclassified", stats.unclassified],
    ["unparsable", stats.garbage],
    ["wrong answers", stats.wrong],
    ["hangs", stats.hangs]
  ]
  for (const [name, list] of lists) {
    if (list.length === 0) continue
    out()
    out(`${name} (first ${Math.min(KEEP, list.length)} of ${list.length}; replay with --seed ${SEED} --replay <index> --verbose):`)
    for (const f of list.slice(0, KEEP)) out(`  #${f.index} ${f.category}/${f.variant}: ${f.what}\n      ${f.input.slice(0, 800)}`)
  }
  if (stats.controlFailures.length > 0) {
    out()
    out(`control failures (first ${Math.min(KEEP, stats.controlFailures.length)}):`)
    for (const f of stats.controlFailures.slice(0, KEEP)) out(`  ${f}`)
  }
  if (stats.warnings.size > 0) {
    out()
    out("Pinboard's warnings (not failures):")
    table(stats.warnings)
  }
  if (stats.defects.length > 0) {
    out()
    out("Pinboard logged:")
    for (const d of stats.defects.slice(0, 5)) out(`  ${d.slice(0, 1500)}`)
  }
  if (stats.crashed !== undefined) {
    out()
    out(`crash: ${stats.crashed}`)
  }
  const reasons: Array<string> = []
  if (stats.crashed !== undefined) reasons.push("crash")
  if (fiveHundreds > 0) reasons.push("500s")
  if (stats.defects.length > 0) reasons.push("defects logged")
  if (stats.unclassified.length > 0) reasons.push("unclassified answers")
  if (stats.garbage.length > 0) reasons.push("unparsable answers")
  if (stats.wrong.length > 0) reasons.push("wrong answers")
  if (stats.hangs.length > 0) reasons.push("hangs")
  if (stats.controlFailures.length > 0) reasons.push("control failures")
  if (!rssOk) reasons.push("memory beyond its bound")
  if (!fdOk) reasons.push("descriptors not back near the baseline")
  if ((fleet?.workers ?? []).some((w) => w.exit !== undefined)) reasons.push("a worker exited (the harness's problem: the controls cannot pass)")
  if (stats.sendErrors > 0) out(`(client-side send errors: ${stats.sendErrors})`)
  out()
  out(reasons.length === 0 ? "PASS" : `FAIL: ${reasons.join(", ")}`)
  console.log(lines.join("\n"))
  return reasons.length === 0
}

const main = async (): Promise<number> => {
  const rows = loadCatalogue()
  const classify = makeClassifier(rows)
  console.log(`starting redis-server, Pinboard and ${2} workers…`)
  fleet = await startFleet({ onPinboardLine, onWorkerLine })
  const world: World = {
    port: fleet.port,
    host: `127.0.0.1:${fleet.port}`,
    workerPorts: fleet.workers.map((w) => w.port),
    placed: [],
    fuzzWorkers: []
  }
  initIdPool(new Rng(SEED))
  await waitForColdStart(world)
  await placeControls(world)
  console.log(`pinboard pid ${fleet.pinboard.pid} on port ${fleet.port}; cold start over after ${(elapsed() / 1000).toFixed(1)} s`)

  if (REPLAY !== undefined) {
    await runOne(REPLAY, world, classify, true)
    return report({ warmupKiB: rssKiB(fleet.pinboard.pid) ?? 0, fdBaseline: fdCounts(fleet.pinboard.pid), settled: fdCounts(fleet.pinboard.pid), endKiB: rssKiB(fleet.pinboard.pid), durationMs: 1, stoppedByCap: false })
      ? 0
      : 1
  }

  // Warm-up: inputs of another seed, not counted, so that the baseline is taken warm.
  const hardDeadline = started + HARD_LIMIT_MS - 60_000
  await pool(INPUTS + 1_000_000, INPUTS + 1_000_000 + WARMUP_INPUTS, world, classify, false, hardDeadline)
  await sleep(6000) // idle keep-alive connections close (Node's 5 s)
  const pid = fleet.pinboard.pid
  const warmupKiB = rssKiB(pid) ?? 0
  const fdBaseline = fdCounts(pid)
  const ports = { pinboard: fleet.port, redis: fleet.redisPort, workers: fleet.workers.map((w) => [w.id, w.port] as const) }
  const peersBaseline = socketPeers(pid, ports)
  console.log(`warm-up: ${stats.warmupInputs} inputs; RSS ${mib(warmupKiB)} MiB, ${fdBaseline?.fds} descriptors (${fdBaseline?.sockets} sockets)`)
  stats.rss.push({ atMs: elapsed(), inputs: 0, kib: warmupKiB })

  const fuzzStart = performance.now()
  const deadline = Math.min(fuzzStart + SECONDS * 1000, hardDeadline)
  const sampler = setInterval(() => sampleProcess(pid, stats.inputs), 5000)
  const progress = setInterval(() => {
    const rate = (stats.inputs / (performance.now() - fuzzStart)) * 1000
    console.log(
      `  ${stats.inputs} inputs, ${rate.toFixed(0)}/s; 500s ${stats.fiveHundreds.length}, unclassified ${stats.unclassified.length}, wrong ${stats.wrong.length}, hangs ${stats.hangs.length}, controls failed ${stats.controlFailures.length}; RSS ${mib(rssKiB(pid) ?? 0)} MiB`
    )
  }, 15_000)
  await pool(0, INPUTS, world, classify, true, deadline)
  clearInterval(sampler)
  clearInterval(progress)
  const durationMs = performance.now() - fuzzStart
  const stoppedByCap = stats.inputs < INPUTS
  recordControl(await runControls(world, 999_999))
  await checkAlive(fleet)
  const endKiB = rssKiB(pid)
  if (endKiB !== undefined) stats.rss.push({ atMs: elapsed(), inputs: stats.inputs, kib: endKiB })

  // Descriptors back near the baseline once idle connections are gone.
  agent.destroy()
  let settled = fdCounts(pid)
  const settleUntil = performance.now() + SETTLE_MS
  while (settled !== undefined && fdBaseline !== undefined && settled.fds > fdBaseline.fds && performance.now() < settleUntil) {
    await sleep(500)
    settled = fdCounts(pid)
  }
  await checkAlive(fleet)
  const peersSettled = socketPeers(pid, ports)
  return report({ warmupKiB, fdBaseline, settled, endKiB, durationMs, stoppedByCap, peersBaseline, peersSettled }) ? 0 : 1
}

// ---- exits ------------------------------------------------------------------------------------------

const hardLimit = setTimeout(() => {
  console.log(`FAIL: the hard limit of ${HARD_LIMIT_MS / 1000} s was reached (something hangs); stopping everything`)
  stopAllSync()
  process.exit(1)
}, HARD_LIMIT_MS)
hardLimit.unref()

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.log(`\n${signal}: stopping every process started`)
    stopAllSync()
    process.exit(130)
  })
}
process.on("exit", () => stopAllSync())
process.on("uncaughtException", (error) => {
  console.error("fuzz harness failed:", error)
  stopAllSync()
  process.exit(1)
})

main().then(
  (code) => {
    stopAllSync()
    process.exit(code)
  },
  (error: unknown) => {
    console.error("fuzz harness failed:", error)
    stopAllSync()
    process.exit(1)
  }
)
