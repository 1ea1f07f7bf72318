// The fleet page's script (docs/operations.md "The fleet page"): polls fleet.json and redraws.
// Every value from the registry (worker ids, namespaces, URLs) reaches the page as text
// (textContent, setAttribute), never as markup. When fleet.json asks for an operator credential
// (401 or 403: a Pinboard with `credentials`), the page stops polling and asks for a key; the
// key is kept in this tab's sessionStorage alone (never localStorage, never a URL) and sent as
// `Authorization: Bearer` on every poll.
"use strict"

const EVERY_MS = 2000
const KEY_ITEM = "pinboard-fleet-key"
/** The headline rates average the last this many seconds. */
const RECENT = 10

const byId = (id) => document.getElementById(id)
const svgNs = "http://www.w3.org/2000/svg"

const cell = (text, className) => {
  const td = document.createElement("td")
  td.textContent = text
  if (className) td.className = className
  return td
}

const stateOf = (w) => {
  if (w.leaseLeftMs <= 0) return "lapsed"
  const flags = []
  if (w.draining) flags.push("draining")
  if (w.degraded) flags.push("degraded")
  return flags.length === 0 ? "live" : flags.join(", ")
}

const seconds = (ms) => (ms / 1000).toFixed(1)
const rate = (n) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2))

const recentMean = (series) => {
  const recent = series.slice(-RECENT)
  return recent.length === 0 ? 0 : recent.reduce((a, b) => a + b, 0) / recent.length
}

const drawWorkers = (snapshot) => {
  const body = byId("workers")
  const rows = snapshot.workers.map((w) => {
    const tr = document.createElement("tr")
    const state = stateOf(w)
    tr.className = state.split(", ")[0]
    tr.setAttribute("data-worker", w.worker)
    const cells = [
      cell(w.worker),
      cell(state, "state"),
      cell(seconds(w.leaseLeftMs), "num"),
      cell(String(w.headroom), "num"),
      cell(String(w.placements), "num"),
      cell(String(w.nacks), "num"),
      cell(w.namespaces.join(", ")),
      cell(w.advertiseUrl, "muted")
    ]
    const fields = ["worker", "state", "lease-left", "headroom", "placements", "nacks", "namespaces", "advertise-url"]
    cells.forEach((td, i) => td.setAttribute("data-field", fields[i]))
    tr.append(...cells)
    return tr
  })
  body.replaceChildren(...rows)
  byId("worker-count").textContent = `(${snapshot.workers.length})`
  const uncounted = byId("uncounted")
  uncounted.hidden = snapshot.uncountedBuckets.length === 0
  uncounted.textContent = `Placements not counted in ${snapshot.uncountedBuckets.length} of ${snapshot.buckets} buckets (unreachable): the counts are low.`
}

const drawChart = (id, series, slots, color) => {
  const svg = byId(`${id}-chart`)
  const peak = Math.max(0, ...series)
  const top = peak > 0 ? peak : 1
  const step = 300 / Math.max(1, slots - 1)
  const offset = slots - series.length
  const points = series.map((v, i) => `${((offset + i) * step).toFixed(1)},${(58 - (v / top) * 54).toFixed(1)}`).join(" ")
  const line = document.createElementNS(svgNs, "polyline")
  line.setAttribute("points", points)
  line.setAttribute("fill", "none")
  line.setAttribute("stroke", color)
  line.setAttribute("stroke-width", "1.5")
  line.setAttribute("vector-effect", "non-scaling-stroke")
  svg.replaceChildren(line)
  byId(`${id}-peak`).textContent = `peak ${rate(peak)}/s`
}

const drawRates = (rates) => {
  const slots = rates.kept
  const minutes = String(Math.round((slots * rates.intervalMs) / 60000))
  byId("window").textContent = minutes
  for (const start of document.querySelectorAll(".chart-start")) start.textContent = `${minutes} min ago`
  byId("requests-rate").textContent = rate(recentMean(rates.requests))
  byId("errors-rate").textContent = rate(recentMean(rates.errors))
  drawChart("requests", rates.requests, slots, "#2f5fb3")
  drawChart("errors", rates.errors, slots, "#b3261e")
}

const setStatus = (text, ok) => {
  const status = byId("status")
  status.textContent = text
  status.className = ok ? "status" : "status stale"
}

/** What a refused key is, by fleet.json's status. */
const REFUSED = {
  401: "it matches no credential of this Pinboard",
  403: "it is a worker's credential; the fleet takes an operator key or the deployment token"
}

/** Why fleet.json refused a key: its status, `{"error"}` body and what that means. */
const refusalOf = async (res) => {
  const body = await res.json().catch(() => undefined)
  const error = typeof body?.error === "string" ? body.error : res.statusText
  return `Key refused (${res.status} ${error}): ${REFUSED[res.status]}.`
}

/** Shows the key form, with why the last key was refused when one was sent. */
const askForKey = (refusal) => {
  sessionStorage.removeItem(KEY_ITEM)
  byId("fleet").hidden = true
  byId("workers").replaceChildren()
  const refused = byId("key-refused")
  refused.hidden = refusal === undefined
  refused.textContent = refusal ?? ""
  byId("key-form").hidden = false
  byId("key-input").value = ""
  byId("key-input").focus()
  setStatus("operator key required", false)
}

const refresh = async () => {
  let again = true
  try {
    const key = sessionStorage.getItem(KEY_ITEM)
    const headers = key === null ? {} : { authorization: `Bearer ${key}` }
    const res = await fetch("fleet.json", { cache: "no-store", headers })
    if (res.status === 401 || res.status === 403) {
      // Polled again once a key is entered.
      again = false
      askForKey(key === null ? undefined : await refusalOf(res))
      return
    }
    if (!res.ok) throw new Error(`fleet.json answered ${res.status}`)
    const snapshot = await res.json()
    drawWorkers(snapshot)
    drawRates(snapshot.rates)
    byId("updated").textContent = new Date(snapshot.now).toISOString().replace("T", " ").slice(0, 19) + " UTC"
    byId("updated").setAttribute("data-now", String(snapshot.now))
    setStatus("live", true)
  } catch (error) {
    setStatus(`stale: ${error instanceof Error ? error.message : String(error)}`, false)
  } finally {
    if (again) setTimeout(refresh, EVERY_MS)
  }
}

byId("key-form").addEventListener("submit", (event) => {
  event.preventDefault()
  const key = byId("key-input").value.trim()
  if (key === "") return
  // What an Authorization header can carry; fetch would throw on anything else, poll after poll.
  if (!/^[\x20-\x7e]+$/.test(key)) return askForKey("Key refused: a key is printable ASCII.")
  sessionStorage.setItem(KEY_ITEM, key)
  byId("key-input").value = ""
  byId("key-form").hidden = true
  byId("fleet").hidden = false
  setStatus("loading", true)
  void refresh()
})

byId("every").textContent = String(EVERY_MS / 1000)
void refresh()
