// Debian's Chromium for the browser tests (playwright-core drives it).
export const CHROMIUM = "/usr/bin/chromium"

/** The machine's network is closed: Chromium must not try its background connections. */
export const CHROMIUM_ARGS: ReadonlyArray<string> = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]
