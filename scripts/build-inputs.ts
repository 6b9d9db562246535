/**
 * Prints one SHA-256 over everything the production build is made from: Bun's version, the
 * sources, the build scripts, the manifest, the lockfile and the compiler settings. `build.sh
 * --if-changed` builds only when it differs from the build's own.
 */
import { createHash } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

const root = join(import.meta.dir, "..")
const files = [
  ...readdirSync(join(root, "src"), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(root.length + 1)),
  "scripts/build.sh",
  "scripts/build-inputs.ts",
  "scripts/build.ts",
  "package.json",
  "bun.lock",
  "bunfig.toml",
  "tsconfig.json"
].sort()

const hash = createHash("sha256").update(`bun ${Bun.version}\n`)
for (const file of files) hash.update(`${file}\n`).update(readFileSync(join(root, file))).update("\n")
console.log(hash.digest("hex"))
