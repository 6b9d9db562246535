import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type BrowserContext, chromium } from "playwright-core"

/**
 * A headless Chromium for the tests: Debian's `chromium` (installed when missing), driven by
 * playwright-core, with a new empty profile and nothing of its own reaching the network.
 */
export interface Browser {
  readonly context: BrowserContext
  readonly close: () => Promise<void>
}

const executable = "/usr/bin/chromium"

const run = (command: string, args: ReadonlyArray<string>) => {
  const result = spawnSync(command, args, { encoding: "utf8", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } })
  if (result.status !== 0) throw new Error(`${command} ${args.join(" ")} failed: ${result.error ?? ""}${result.stdout}${result.stderr}`)
}

/** The browser's path, installing Debian's package when it is missing. */
const chromiumPath = (): string => {
  if (existsSync(executable)) return executable
  if (process.getuid?.() !== 0) throw new Error("Chromium is not installed: run `apt-get install chromium` as root")
  run("apt-get", ["update"])
  run("apt-get", ["install", "-y", "--no-install-recommends", "chromium"])
  if (!existsSync(executable)) throw new Error(`apt-get installed chromium but ${executable} is missing`)
  return executable
}

export const launchChromium = async (): Promise<Browser> => {
  const profile = mkdtempSync(join(tmpdir(), "petstore-chromium-"))
  try {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: chromiumPath(),
      headless: true,
      args: [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"
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
