import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { inject } from "vitest"
import { waitFor } from "./WaitFor.js"

/**
 * Makes `name` once per `npm test` run, however many files and worker threads ask: the caller
 * that creates `name.lock` in the run's folder (test/support/runSetup.ts) runs `make`, and
 * `name.done` (or `name.failed`, with the error) tells every other caller when it is there.
 * Returns the run's folder.
 */
export const oncePerRun = async (
  name: string,
  make: (folder: string) => Promise<void>,
  timeoutMs = 600_000
): Promise<string> => {
  const folder = inject("runFolder")
  const done = join(folder, `${name}.done`)
  const failed = join(folder, `${name}.failed`)
  let mine = true
  try {
    mkdirSync(join(folder, `${name}.lock`))
  } catch {
    mine = false
  }
  if (mine) {
    try {
      await make(folder)
      writeFileSync(done, "")
    } catch (error) {
      writeFileSync(failed, error instanceof Error ? error.message : String(error))
      throw error
    }
    return folder
  }
  await waitFor(() => {
    if (existsSync(failed)) {
      throw new Error(`${name}, made by another test file, failed: ${readFileSync(failed, "utf8")}`)
    }
    return existsSync(done)
  }, { what: `${name}, made by another test file`, timeout: timeoutMs, interval: 200 })
  return folder
}
