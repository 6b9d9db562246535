import { existsSync } from "node:fs"

/** The command that installs what the tests need from Debian's packages (run by `npm test` first). */
export const setupCommand = "sh scripts/setup-test-machine.sh"

/**
 * Fails, naming the set-up command, when any of `probes` (files Debian's `packages` install) is
 * missing: the tests run real engines, installed once before the run, never from inside a test.
 */
export const requireDebianPackages = (probes: ReadonlyArray<string>, packages: ReadonlyArray<string>) => {
  const missing = probes.filter((probe) => !existsSync(probe))
  if (missing.length > 0) {
    throw new Error(
      `${missing.join(", ")} missing (Debian's ${packages.join(", ")}): run \`${setupCommand}\` as root, ` +
        "or `npm test`, which runs it first"
    )
  }
}
