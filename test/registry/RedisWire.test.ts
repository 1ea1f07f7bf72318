// The registry's wire to Redis (src/registry/*Wire.ts, WireReply.ts): every reply kind of every script
// decodes to what it says, in the format its script's header gives; a reply the protocol does
// not allow is a defect (UnexpectedReply) naming the script and the reply, never an answer.
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Option, Result } from "effect"
import type { ResolveOutcome } from "../../src/registry/Domain.js"
import type { RecordUpdate } from "../../src/registry/MembershipView.js"
import type { ScriptName } from "../../src/registry/RedisConnection.js"
import {
  callerPlacementArgs,
  decodeCallerPlacementReply,
  decodeCasReply,
  decodePlacementReply,
  decodeSweepReply,
  decodeWindDownReply,
  releaseArgs,
  tagArgs
} from "../../src/registry/PlacementWire.js"
import { decodeAskReply, decodeLastProposalReply, decodeProposalReply, encodeResolveQuery, ResolveMode, type AskReply, type ProposalReply } from "../../src/registry/ResolveWire.js"
import { decodeLogPage, decodeMembersPage, decodeShortPage, type ViewPayload } from "../../src/registry/ViewWire.js"
import { orDefect, UnexpectedReply } from "../../src/registry/WireReply.js"
import { decodeDoneReply, decodeHeartbeatReply, decodeHeldReply, decodeRegisterReply, decodeWorkersReply, encodeRegisterEntry } from "../../src/registry/WorkerWire.js"
import * as Gen from "../support/Arbitraries.js"

// --- resolve.lua's replies, written as the script writes them ---------------------------

const recordLines = (update: RecordUpdate): ReadonlyArray<string> => {
  const r = update.record
  if (r === undefined) return [update.worker, "0", "", "", "", "", "", "", ""]
  return [update.worker, "1", r.memberKeys.join(" "), String(r.headroom), r.draining ? "1" : "0", r.degraded ? "1" : "0", String(r.nackWindowStart), String(r.nackCount), JSON.stringify(r.namespaces)]
}

/** resolve.lua viewPayload. */
const payloadLines = (p: ViewPayload): ReadonlyArray<string> => [
  p.gen,
  p.seq,
  p.state,
  ...(p.short === undefined ? ["-1"] : [String(p.short.length), ...p.short]),
  String(p.updates.length),
  ...p.updates.flatMap(recordLines)
]

const resolveWire = (reply: AskReply | ProposalReply): string => {
  switch (reply._tag) {
    case "Placed":
      return `placed\n${reply.worker}\n${reply.advertiseUrl}\n${reply.epoch}\n${reply.isNew ? "1" : "0"}`
    case "UnknownNamespace":
      return "unknown"
    case "NoLiveBackends":
      return "none"
    case "ColdStart":
      return `cold\n${reply.retryAfterMs}`
    case "Rebound":
      return `rebound\n${reply.env}`
    case "HeldByAnotherHostname":
      return "held"
    case "TakeoverInProgress":
      return `takeover\n${reply.retryAfterMs}`
    case "Displaced":
      return `displaced\n${reply.retryAfterMs}`
    case "AskAgain":
      return "again"
    case "ProposalWanted":
      return ["choose", ...payloadLines(reply.view)].join("\n")
    case "ProposalRefused":
      return ["stale", ...payloadLines(reply.view)].join("\n")
  }
}

const word = Gen.stringMatching(/^[A-Za-z0-9._~:/-]{1,12}$/)
const epoch = Gen.map(Gen.bigInt({ min: 1n, max: 10n ** 22n }), String)
const ms = Gen.nat({ max: 10 ** 9 })
const registration = Gen.record({ namespace: word, hostname: Gen.constantFrom("", "a.example"), env: Gen.constantFrom("", "prod") })
const update: Gen.Arbitrary<RecordUpdate> = Gen.oneof(
  Gen.map(word, (worker) => ({ worker, record: undefined })),
  Gen.map(
    Gen.record({
      worker: word,
      memberKeys: Gen.uniqueArray(word, { maxLength: 3 }),
      headroom: Gen.double({ min: 0, max: 1e6 }),
      draining: Gen.boolean(),
      degraded: Gen.boolean(),
      nackWindowStart: ms,
      nackCount: Gen.nat({ max: 99 }),
      namespaces: Gen.array(registration, { maxLength: 2 })
    }),
    (record) => ({ worker: record.worker, record })
  )
)
const payload: Gen.Arbitrary<ViewPayload> = Gen.record({
  gen: Gen.map(ms, String),
  seq: Gen.map(ms, String),
  state: Gen.constantFrom("done" as const, "more" as const, "full" as const),
  short: Gen.option(Gen.array(word, { maxLength: 4 }), { nil: undefined }),
  updates: Gen.array(update, { maxLength: 4 })
})
const outcome: Gen.Arbitrary<ResolveOutcome> = Gen.oneof(
  Gen.record({ _tag: Gen.constant("Placed" as const), worker: word, advertiseUrl: Gen.map(word, (w) => `http://${w}`), epoch, isNew: Gen.boolean() }),
  Gen.constant({ _tag: "UnknownNamespace" as const }),
  Gen.constant({ _tag: "NoLiveBackends" as const }),
  Gen.record({ _tag: Gen.constant("ColdStart" as const), retryAfterMs: ms }),
  Gen.record({ _tag: Gen.constant("Rebound" as const), env: Gen.constantFrom("", "prod", "staging") }),
  Gen.constant({ _tag: "HeldByAnotherHostname" as const }),
  Gen.record({ _tag: Gen.constant("TakeoverInProgress" as const), retryAfterMs: ms }),
  Gen.record({ _tag: Gen.constant("Displaced" as const), retryAfterMs: ms })
)
const askReply: Gen.Arbitrary<AskReply> = Gen.oneof(
  outcome,
  Gen.constant({ _tag: "AskAgain" as const }),
  Gen.map(payload, (view) => ({ _tag: "ProposalWanted" as const, view }))
)
const proposalReply: Gen.Arbitrary<ProposalReply> = Gen.oneof(outcome, Gen.map(payload, (view) => ({ _tag: "ProposalRefused" as const, view })))

/** The defect a decoder's reply makes, run as the protocol runs it. */
const defectOf = <R>(decode: (reply: R) => unknown, reply: R): unknown => {
  const exit = Effect.runSyncExit(orDefect(decode)(reply))
  if (Exit.isSuccess(exit)) throw new Error(`decoded ${JSON.stringify(exit.value)}`)
  expect(Cause.findErrorOption(exit.cause)).toEqual(Option.none())
  return Result.getOrThrow(Cause.findDefect(exit.cause))
}

const expectUnexpected = <R>(decode: (reply: R) => unknown, reply: R, script: ScriptName) => {
  const defect = defectOf(decode, reply)
  expect(defect).toBeInstanceOf(UnexpectedReply)
  expect((defect as UnexpectedReply).script).toBe(script)
  expect((defect as UnexpectedReply).reply).toEqual(reply)
  expect((defect as UnexpectedReply).message).toContain(`${script}.lua`)
  expect((defect as UnexpectedReply).message).toContain(JSON.stringify(reply).slice(0, 40))
}

describe("resolve.lua's wire", () => {
  it("a query is its ten fields, the mode named", () => {
    const query = { env: "prod", namespace: "/threads", id: "t1", hostname: "a.example", takeover: "wind_down" as const, caller: undefined, affinity: "x", excluded: [], r1: 0, r2: 0 }
    expect(encodeResolveQuery(1700, { ...query, takeover: "deny" }, ResolveMode.propose, "w-a", "1600", "42")).toBe("1700\nprod\n/threads\nt1\na.example\ndeny\np\nw-a\n1600\n42")
    expect(encodeResolveQuery(1700, query, ResolveMode.ask, "", "", "0").split("\n")).toEqual(["1700", "prod", "/threads", "t1", "a.example", "wind_down", "a", "", "", "0"])
    expect([ResolveMode.ask, ResolveMode.propose, ResolveMode.lastProposal]).toEqual(["a", "p", "f"])
  })

  it("the reply kinds, as the script writes them", () => {
    expect(decodeAskReply("placed\nw-a\nhttp://10.0.0.1:9000\n1764452669741000001\n0")).toEqual({
      _tag: "Placed",
      worker: "w-a",
      advertiseUrl: "http://10.0.0.1:9000",
      epoch: "1764452669741000001",
      isNew: false
    })
    expect(decodeProposalReply("placed\nw-a\nhttp://u\n7\n1")).toMatchObject({ _tag: "Placed", isNew: true })
    expect(decodeAskReply("unknown")).toEqual({ _tag: "UnknownNamespace" })
    expect(decodeAskReply("none")).toEqual({ _tag: "NoLiveBackends" })
    expect(decodeLastProposalReply("none")).toEqual({ _tag: "NoLiveBackends" })
    expect(decodeAskReply("cold\n1200")).toEqual({ _tag: "ColdStart", retryAfterMs: 1200 })
    expect(decodeAskReply("rebound\nprod")).toEqual({ _tag: "Rebound", env: "prod" })
    expect(decodeAskReply("rebound\n")).toEqual({ _tag: "Rebound", env: "" })
    expect(decodeAskReply("held")).toEqual({ _tag: "HeldByAnotherHostname" })
    expect(decodeAskReply("takeover\n900")).toEqual({ _tag: "TakeoverInProgress", retryAfterMs: 900 })
    expect(decodeAskReply("displaced\n15000")).toEqual({ _tag: "Displaced", retryAfterMs: 15000 })
    expect(decodeAskReply("again")).toEqual({ _tag: "AskAgain" })
    // gen, seq, state, two short workers, two records (one present, one gone)
    const choose = ["choose", "1600", "42", "done", "2", "w-s", "w-t", "2", "w-a", "1", "|/n |/m", "2.5", "0", "1", "1700", "3", '[{"namespace":"/n","hostname":"","env":""}]', "w-b", "0", "", "", "", "", "", "", ""].join("\n")
    expect(decodeAskReply(choose)).toEqual({
      _tag: "ProposalWanted",
      view: {
        gen: "1600",
        seq: "42",
        state: "done",
        short: ["w-s", "w-t"],
        updates: [
          {
            worker: "w-a",
            record: { worker: "w-a", memberKeys: ["|/n", "|/m"], headroom: 2.5, draining: false, degraded: true, nackWindowStart: 1700, nackCount: 3, namespaces: [{ namespace: "/n", hostname: "", env: "" }] }
          },
          { worker: "w-b", record: undefined }
        ]
      }
    })
    expect(decodeProposalReply("stale\n1600\n43\nfull\n-1\n0")).toEqual({ _tag: "ProposalRefused", view: { gen: "1600", seq: "43", state: "full", short: undefined, updates: [] } })
  })

  it.prop("every reply to an ask round-trips", [askReply], ([reply]) => {
    expect(decodeAskReply(resolveWire(reply))).toEqual(reply)
  })

  it.prop("every reply to a proposal round-trips", [proposalReply], ([reply]) => {
    expect(decodeProposalReply(resolveWire(reply))).toEqual(reply)
  })

  it.prop("every reply to the last proposal round-trips", [outcome], ([reply]) => {
    expect(decodeLastProposalReply(resolveWire(reply))).toEqual(reply)
  })

  it("an unknown reply is a defect naming the script and the reply, never NoLiveBackends", () => {
    for (const reply of ["surprise", "", "placed", "NONE", "none\n", 42, null, ["placed"]]) expectUnexpected(decodeAskReply, reply, "resolve")
  })

  it("a known kind malformed, or out of its mode, is a defect", () => {
    const malformed = [
      "placed\nw-a\nhttp://u\n7", // a field short
      "placed\nw\nx\nhttp://u\n7\n0", // a field over (a worker id with a line break)
      "placed\nw-a\nhttp://u\n7\nyes",
      "cold",
      "cold\nsoon",
      "takeover\n1\n2",
      "choose\n1600\n42\ndone\n0\n1", // a record announced, none sent
      "choose\n1600\n42\nlater\n0\n0", // no such state
      "choose\n1600\n42\ndone\n0\n1\nw-a\n1\n|/n\n1\n0\n0\n0\n0\nnot json"
    ]
    for (const reply of malformed) expectUnexpected(decodeAskReply, reply, "resolve")
    expectUnexpected(decodeAskReply, "stale\n1600\n43\nfull\n-1\n0", "resolve")
    expectUnexpected(decodeProposalReply, "again", "resolve")
    expectUnexpected(decodeProposalReply, "choose\n1600\n43\nfull\n-1\n0", "resolve")
    expectUnexpected(decodeLastProposalReply, "stale\n1600\n43\nfull\n-1\n0", "resolve")
  })
})

describe("the other scripts' replies", () => {
  it("fleet.lua: register, heartbeat, deregister and nack", () => {
    expect(decodeRegisterReply("OK")).toEqual({ _tag: "Registered" })
    expect(decodeRegisterReply("conflict")).toEqual({ _tag: "BindingConflict" })
    expect(decodeHeartbeatReply(["lost"])).toEqual({ _tag: "LeaseLost" })
    expect(decodeHeartbeatReply(["renewed"])).toEqual({ _tag: "Renewed", windDown: [] })
    expect(decodeHeartbeatReply(["renewed", "", "/n", "x", "17", "1700", "prod", "/m", "y", "18", "1800"])).toEqual({
      _tag: "Renewed",
      windDown: [
        { env: "", namespace: "/n", id: "x", epoch: "17", deadline: 1700 },
        { env: "prod", namespace: "/m", id: "y", epoch: "18", deadline: 1800 }
      ]
    })
    expect(decodeDoneReply("OK")).toBeUndefined()
    for (const reply of ["registered", "", ["OK"], null]) expectUnexpected(decodeRegisterReply, reply, "fleet")
    for (const reply of ["renewed", ["renewed", "", "/n", "x", "17"], ["lost", "1"], ["kept"], ["renewed", "", "/n", "x", "17", "soon"]]) {
      expectUnexpected(decodeHeartbeatReply, reply, "fleet")
    }
    expectUnexpected(decodeDoneReply, "QUEUED", "fleet")
  })

  it("sweep.lua", () => {
    expect(decodeSweepReply("more")).toBe(true)
    expect(decodeSweepReply("done")).toBe(false)
    expectUnexpected(decodeSweepReply, "finished", "sweep")
  })

  it("release.lua, tag.lua and winddown.lua: compare-and-set on the epoch", () => {
    for (const script of ["release", "tag"] as const) {
      const decode = decodeCasReply(script)
      expect(decode(["done"])).toEqual({ _tag: "Done" })
      expect(decode(["conflict", "17"])).toEqual({ _tag: "Conflict", current: "17" })
      expect(decode(["conflict"])).toEqual({ _tag: "Conflict", current: null })
      expect(decode(["held"])).toEqual({ _tag: "HeldByAnotherWorker" })
      for (const reply of [["released"], "done", ["conflict", 17], ["done", "17"], ["held", "17"]]) expectUnexpected(decode, reply, script)
    }
    expect(decodeWindDownReply(["winding", "1800"])).toEqual({ _tag: "WindingDown", deadline: 1800 })
    expect(decodeWindDownReply(["conflict", "17"])).toEqual({ _tag: "Conflict", current: "17" })
    expect(decodeWindDownReply(["conflict"])).toEqual({ _tag: "Conflict", current: null })
    for (const reply of [["winding"], ["winding", "later"], ["done"]]) expectUnexpected(decodeWindDownReply, reply, "winddown")
  })

  it("release.lua and tag.lua: an owner grant last, as its count of exact ids, them and its prefixes; none, nothing", () => {
    const key = { env: "", namespace: "/n", id: "x" }
    expect(releaseArgs(key, "17")).toEqual(["", "/n", "x", "17"])
    expect(releaseArgs(key, "17", { exact: ["w-a", "w-b"], prefixes: ["chat-"] })).toEqual(["", "/n", "x", "17", "2", "w-a", "w-b", "chat-"])
    expect(tagArgs(key, "17", "t")).toEqual(["", "/n", "x", "17", "t"])
    expect(tagArgs(key, "17", "t", { exact: [], prefixes: [] })).toEqual(["", "/n", "x", "17", "t", "0"])
    expect(tagArgs(key, "17", "t", { exact: [], prefixes: ["a-", "b-"] })).toEqual(["", "/n", "x", "17", "t", "0", "a-", "b-"])
  })

  it("fleet.lua's register entry ends with the caller key, \"\" for none", () => {
    const registration = { worker: "w-a", incarnation: "i1", advertiseUrl: "http://u", namespaces: [{ namespace: "/n", hostname: "", env: "" }], headroom: 1, draining: false }
    expect(encodeRegisterEntry(1600, { ...registration, callerKey: "k1" }, 100).at(-1)).toBe("k1")
    expect(encodeRegisterEntry(1600, { ...registration, callerKey: undefined }, 100)).toHaveLength(13)
    expect(encodeRegisterEntry(1600, { ...registration, callerKey: undefined }, 100).at(-1)).toBe("")
  })

  it("placement.lua asked with a worker: the row and the worker's incarnation and caller key", () => {
    const key = { env: "", namespace: "/n", id: "x" }
    const row = ["w-a", "inc1", "17", "1600", "", "t", "0", "http://u", "1"]
    expect(callerPlacementArgs(key, "w-b")).toEqual(["", "/n", "x", "w-b"])
    const decode = decodeCallerPlacementReply(key)
    expect(decode([row, ["inc2", "k2"]])).toEqual({ placement: decodePlacementReply(key)(row), caller: { incarnation: "inc2", callerKey: "k2" } })
    expect(decode([[], []])).toEqual({ placement: undefined, caller: undefined })
    expect(decode([row, []])).toMatchObject({ caller: undefined })
    for (const reply of [row, [row], [row, ["inc2"]], [row, ["inc2", null]], [row, ["inc2", ""]], [["w-a"], []], [[...row.slice(0, 3), "soon", ...row.slice(4)], []], "w-a"]) {
      expectUnexpected(decode, reply, "placement")
    }
  })

  it("placement.lua", () => {
    const key = { env: "", namespace: "/n", id: "x" }
    const decode = decodePlacementReply(key)
    expect(decode([])).toBeUndefined()
    expect(decode(["w-a", "inc1", "17", "1600", "", "t", "0", "http://u", "1"])).toEqual({
      ...key,
      worker: "w-a",
      incarnation: "inc1",
      epoch: "17",
      placedAt: 1600,
      hostname: "",
      tag: "t",
      windDownAt: 0,
      advertiseUrl: "http://u",
      live: true
    })
    expect(decode(["w-a", "inc1", "17", "1600", "h", "", "1900", "", "0"])).toMatchObject({ advertiseUrl: null, live: false, windDownAt: 1900 })
    for (const reply of [["w-a"], "w-a", ["w-a", "inc1", "17", "soon", "", "t", "0", "http://u", "1"]]) expectUnexpected(decode, reply, "placement")
  })

  it("workers.lua and held.lua", () => {
    const row = ["w-a", "http://u", '[{"namespace":"/n","hostname":"","env":""}]', "2.5", "1900", "0", "1", "1700", "3"]
    expect(decodeWorkersReply([row])).toEqual([
      {
        worker: "w-a",
        advertiseUrl: "http://u",
        namespaces: [{ namespace: "/n", hostname: "", env: "" }],
        headroom: 2.5,
        leaseExpiresAt: 1900,
        draining: false,
        degraded: true,
        nackWindowStart: 1700,
        nackCount: 3
      }
    ])
    expect(decodeWorkersReply([])).toEqual([])
    for (const reply of [[row.slice(1)], [[...row.slice(0, 2), "{", ...row.slice(3)]], "w-a"]) expectUnexpected(decodeWorkersReply, reply, "workers")
    expect(decodeHeldReply(2)([3, 0])).toEqual([3, 0])
    for (const reply of [[3], [3, "0"], "3"]) expectUnexpected(decodeHeldReply(2), reply, "held")
  })

  it("view.lua: log, members and short pages", () => {
    const record = ["w-a", "1", "|/n", "1", "0", "0", "0", "0", '[{"namespace":"/n","hostname":"","env":""}]']
    const gone = ["w-b", "0", "", "", "", "", "", "", ""]
    expect(decodeLogPage(["1600", "44", "3", ...record, ...gone, "|", "43", "44"])).toMatchObject({
      gen: "1600",
      seq: "44",
      trim: "3",
      last: "44",
      updates: [{ worker: "w-a", record: { memberKeys: ["|/n"], headroom: 1 } }, { worker: "w-b", record: undefined }]
    })
    expect(decodeLogPage(["1600", "44", "3", "|"])).toEqual({ gen: "1600", seq: "44", trim: "3", updates: [], last: undefined })
    expect(decodeMembersPage(["1600", "44", "3", ...record])).toMatchObject({ gen: "1600", seq: "44", updates: [{ worker: "w-a" }] })
    expect(decodeShortPage(["1600", "44", "3", "w-a", "w-c"])).toEqual(["w-a", "w-c"])
    for (const reply of [["1600", "44", "3", ...record], ["1600", "44", "3", ...record, "|"], ["1600", "44"]]) expectUnexpected(decodeLogPage, reply, "view")
    for (const reply of [["1600", "44", "3", ...record.slice(1)], ["1600", "44", "3", "w-a", "maybe", "", "", "", "", "", "", ""]]) expectUnexpected(decodeMembersPage, reply, "view")
    expectUnexpected(decodeShortPage, "w-a", "view")
  })
})
