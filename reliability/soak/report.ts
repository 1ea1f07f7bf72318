// The soak's figures: one sample every few seconds, the windows compared at the end, and the
// verdict on whether memory levels off.
import type { Tally, WsTally } from "./load.js"

export interface Sample {
  /** Seconds since the load started, as scheduled (the sample is taken a few ms later). */
  readonly t: number
  readonly pinboardRss: number | undefined
  /** V8 heap in use and heap size, through the inspector (undefined with --no-heap). */
  readonly heapUsed: number | undefined
  readonly heapTotal: number | undefined
  readonly pinboardFds: number | undefined
  /** Pinboard's CPU use over the interval, in percent of one core. */
  readonly pinboardCpu: number | undefined
  readonly redisUsed: number | undefined
  readonly redisRss: number | undefined
  readonly dbsize: number | undefined
  readonly redisClients: number | undefined
  readonly http: Tally
  readonly ws: WsTally
  /** Worker processes the soak keeps alive right now. */
  readonly workers: number
  /** Workers Pinboard lists in `GET /registry/workers` (undefined when that failed). */
  readonly listed: number | undefined
  readonly churned: number
}

export const mb = (bytes: number | undefined): string => (bytes === undefined ? "?" : (bytes / 1048576).toFixed(1))
const pad = (text: string | number, width: number) => String(text).padStart(width)

export const sampleLine = (s: Sample, intervalS: number): string =>
  [
    `[${pad(s.t.toFixed(0), 5)}s]`,
    `pinboard rss ${pad(mb(s.pinboardRss), 6)} MB heap ${pad(mb(s.heapUsed), 5)}/${pad(mb(s.heapTotal), 5)} MB fds ${pad(s.pinboardFds ?? "?", 4)} cpu ${pad(s.pinboardCpu === undefined ? "?" : s.pinboardCpu.toFixed(0), 3)}%`,
    `| redis used ${pad(mb(s.redisUsed), 6)} MB rss ${pad(mb(s.redisRss), 6)} MB keys ${pad(s.dbsize ?? "?", 6)} clients ${pad(s.redisClients ?? "?", 3)}`,
    `| ${pad((s.http.requests / intervalS).toFixed(0), 4)} req/s ${s.http.brief()}`,
    `| ws ${s.ws.brief()}`,
    `| workers ${s.workers} listed ${s.listed ?? "?"} churned ${s.churned}`
  ].join(" ")

export interface Window {
  /** Seconds since the load started: samples with from < t <= to. */
  readonly from: number
  readonly to: number
}

export interface Windows {
  readonly first: Window
  readonly last: Window
  readonly label: string
  readonly warmupS: number
}

/**
 * First 10 minutes against the last 10 for runs of 30 minutes or more; otherwise the first third
 * against the last third of what follows a minute of warm-up (half the run when that is
 * shorter).
 */
export const windowsFor = (durationS: number): Windows => {
  if (durationS >= 30 * 60) {
    return { first: { from: 0, to: 600 }, last: { from: durationS - 600, to: durationS }, label: "first 10 min vs last 10 min", warmupS: 60 }
  }
  const warmupS = Math.min(60, durationS / 2)
  const third = (durationS - warmupS) / 3
  return {
    first: { from: warmupS, to: warmupS + third },
    last: { from: durationS - third, to: durationS },
    label: `first third vs last third after ${warmupS.toFixed(0)} s of warm-up (${third.toFixed(0)} s each)`,
    warmupS
  }
}

/** The window's samples as `[t, value]`, those without a value left out. */
const inWindow = (samples: ReadonlyArray<Sample>, w: Window, pick: (s: Sample) => number | undefined): Array<readonly [number, number]> =>
  samples.filter((s) => s.t > w.from && s.t <= w.to).flatMap((s) => {
    const v = pick(s)
    return v === undefined ? [] : [[s.t, v] as const]
  })

/** The mean of each minute's lowest value (minute k holds k*60 < t <= (k+1)*60). */
const minuteLows = (points: ReadonlyArray<readonly [number, number]>): number => {
  const lows = new Map<number, number>()
  for (const [t, v] of points) {
    const minute = Math.ceil(t / 60) - 1
    lows.set(minute, Math.min(v, lows.get(minute) ?? Infinity))
  }
  return mean([...lows.values()])
}

const mean = (values: ReadonlyArray<number>) => values.reduce((a, b) => a + b, 0) / values.length

/** Least-squares slope of `pick` over time, per hour. */
const slopePerHour = (samples: ReadonlyArray<Sample>, fromS: number, pick: (s: Sample) => number | undefined): number | undefined => {
  const points = samples.filter((s) => s.t > fromS).flatMap((s) => {
    const v = pick(s)
    return v === undefined ? [] : [[s.t, v] as const]
  })
  if (points.length < 3) return undefined
  const mx = mean(points.map(([x]) => x))
  const my = mean(points.map(([, y]) => y))
  let num = 0
  let den = 0
  for (const [x, y] of points) {
    num += (x - mx) * (y - my)
    den += (x - mx) ** 2
  }
  return den === 0 ? undefined : (num / den) * 3600
}

export interface Comparison {
  readonly name: string
  readonly aggregate: "mean" | "minute-lows"
  readonly first: number | undefined
  readonly last: number | undefined
  readonly firstN: number
  readonly lastN: number
  readonly ratio: number | undefined
  readonly min: number | undefined
  readonly max: number | undefined
  readonly slopePerHour: number | undefined
  /** "levels off", "GROWING", or "too short to judge". */
  readonly verdict: "levels off" | "GROWING" | "too short to judge"
}

export const TOLERANCE = 0.1

/**
 * Each window's `mean`, or its `minute-lows` (the mean of each minute's lowest sample: for a
 * sawtooth such as the heap, its troughs, which a leak lifts).
 */
export const compare = (
  name: string,
  samples: ReadonlyArray<Sample>,
  windows: Windows,
  pick: (s: Sample) => number | undefined,
  aggregate: "mean" | "minute-lows" = "mean"
): Comparison => {
  const first = inWindow(samples, windows.first, pick)
  const last = inWindow(samples, windows.last, pick)
  const all = samples.flatMap((s) => {
    const v = pick(s)
    return v === undefined ? [] : [v]
  })
  const of = aggregate === "mean" ? (points: ReadonlyArray<readonly [number, number]>) => mean(points.map(([, v]) => v)) : minuteLows
  const f = first.length === 0 ? undefined : of(first)
  const l = last.length === 0 ? undefined : of(last)
  const ratio = f === undefined || l === undefined || f === 0 ? undefined : l / f
  return {
    name,
    aggregate,
    first: f,
    last: l,
    firstN: first.length,
    lastN: last.length,
    ratio,
    min: all.length === 0 ? undefined : Math.min(...all),
    max: all.length === 0 ? undefined : Math.max(...all),
    slopePerHour: slopePerHour(samples, windows.warmupS, pick),
    verdict: ratio === undefined ? "too short to judge" : ratio <= 1 + TOLERANCE ? "levels off" : "GROWING"
  }
}

/** `pinboard RSS: first window mean 95.1 MB (60 samples), ...: x1.020 -> levels off [...]`; no verdict unless `judged`. */
export const comparisonLine = (c: Comparison, unit: (v: number | undefined) => string, judged = true): string => {
  const slope = c.slopePerHour === undefined ? "?" : `${c.slopePerHour >= 0 ? "+" : ""}${unit(c.slopePerHour)}`
  const ratio = c.ratio === undefined ? "?" : `x${c.ratio.toFixed(3)}`
  return (
    `${c.name}: first window ${c.aggregate === "mean" ? "mean" : "mean of minute lows"} ${unit(c.first)} (${c.firstN} samples), ` +
    `last window ${c.aggregate === "mean" ? "mean" : "mean of minute lows"} ${unit(c.last)} (${c.lastN} samples): ` +
    `${ratio}${judged ? ` -> ${c.verdict}` : ""}  [min ${unit(c.min)}, max ${unit(c.max)}, trend after warm-up ${slope} per hour]`
  )
}
