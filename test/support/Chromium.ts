import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type BrowserContext, chromium } from "playwright-core"
import { ensureDebianPackages } from "./DebianPackages.js"

/**
 * A headless Chromium for the tests: Debian's `chromium` (installed when missing), driven by
 * playwright-core, with a new empty profile and nothing of its own reaching the network.
 */
export interface Browser {
  readonly context: BrowserContext
  readonly close: () => Promise<void>
}

const executable = "/usr/bin/chromium"

/** The browser's path, installing Debian's package when it is missing. */
const chromiumPath = (): string => {
  ensureDebianPackages([executable], ["chromium"])
  return executable
}

export const launchChromium = async (): Promise<Browser> => {
  const profile = mkdtempSync(join(tmpdir(), "petstore-chromium-"))
  try {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: chromiumPath(),
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync"
      ]
    })
    return {
      context,
      close: async () => {
        try {
          await context.close()
        } finally {
          rmSync(profile, { recursive: true, force: true })
        }
      }
    }
  } catch (error) {
    rmSync(profile, { recursive: true, force: true })
    throw error
  }
}
