import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type BrowserContext, chromium } from "playwright-core"
import { requireDebianPackages } from "./DebianPackages.js"

/**
 * A headless Chromium for the tests: Debian's `chromium` (installed by the set-up step), driven by
 * playwright-core, with a new empty profile and nothing of its own reaching the network.
 */
export interface Browser {
  readonly context: BrowserContext
  readonly close: () => Promise<void>
}

const executable = "/usr/bin/chromium"

/** The browser's path, once it is there. */
const chromiumPath = (): string => {
  requireDebianPackages([executable], ["chromium"])
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
