import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"

/**
 * Debian's `packages`, installed with apt-get when any of `probes` (files they install) is
 * missing: the tests run real engines, and CI starts from a machine that may have none.
 */
export const ensureDebianPackages = (probes: ReadonlyArray<string>, packages: ReadonlyArray<string>) => {
  const missing = () => probes.filter((probe) => !existsSync(probe))
  if (missing().length === 0) return
  if (process.getuid?.() !== 0) {
    throw new Error(`${missing().join(", ")} missing: run \`apt-get install ${packages.join(" ")}\` as root`)
  }
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" }
  for (const args of [["update"], ["install", "-y", "--no-install-recommends", ...packages]]) {
    const result = spawnSync("apt-get", args, { encoding: "utf8", env })
    if (result.status !== 0) throw new Error(`apt-get ${args.join(" ")} failed: ${result.stdout}${result.stderr}`)
  }
  if (missing().length > 0) {
    throw new Error(`apt-get installed ${packages.join(" ")} but ${missing().join(", ")} missing`)
  }
}
