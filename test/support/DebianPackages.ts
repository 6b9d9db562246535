import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"

/**
 * Debian's `packages`, installed with apt-get when `probe` (a file one of them installs) is
 * missing: the tests run real engines, and CI starts from a machine that may have none.
 */
export const ensureDebianPackages = (probe: string, packages: ReadonlyArray<string>) => {
  if (existsSync(probe)) return
  if (process.getuid?.() !== 0) throw new Error(`${probe} is missing: run \`apt-get install ${packages.join(" ")}\` as root`)
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" }
  for (const args of [["update"], ["install", "-y", "--no-install-recommends", ...packages]]) {
    const result = spawnSync("apt-get", args, { encoding: "utf8", env })
    if (result.status !== 0) throw new Error(`apt-get ${args.join(" ")} failed: ${result.stdout}${result.stderr}`)
  }
  if (!existsSync(probe)) throw new Error(`apt-get installed ${packages.join(" ")} but ${probe} is missing`)
}
