// Debian's Chromium for the browser tests (playwright-core drives it).
import { chromium, type BrowserContext } from "playwright-core"

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

/** Chromium, headless, with its profile in `userDataDir` (the caller removes it); `args` added to CHROMIUM_ARGS. */
export const launchChromium = (
  userDataDir: string,
  options: { readonly args?: ReadonlyArray<string>; readonly viewport?: { readonly width: number; readonly height: number } } = {}
): Promise<BrowserContext> =>
  chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_ARGS, ...(options.args ?? [])],
    ...(options.viewport === undefined ? {} : { viewport: { ...options.viewport } })
  })
