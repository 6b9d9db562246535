import { spawnSync } from "node:child_process"
import { copyFileSync, existsSync, linkSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { basename, join } from "node:path"
import { requireDebianPackages } from "./DebianPackages.js"
import { oncePerRun } from "./OncePerRun.js"
import { imageNameFile } from "./runSetup.js"

/**
 * What the tests share per `npm test` run, however many files and worker threads ask: the
 * production build (dist/main.js and the executable dist/petstore) and the container image made
 * from it, each made by its first caller and waited for by the others (test/support/OncePerRun.ts);
 * the run's end removes both (test/support/runSetup.ts).
 */

const root = new URL("../..", import.meta.url).pathname

/** The container image's base, as the Containerfile names it. */
export const baseImage = "debian:bookworm-slim"
/** Where the base image's root file system is kept between runs on one machine. */
const rootfsCache = "/var/cache/petstore-test/bookworm-minbase"

/** What Debian's slim image leaves out too: package archives and lists, documentation. */
const slimExcludes = [
  "var/cache/apt/archives/*.deb",
  "var/lib/apt/lists/*",
  "usr/share/doc/*",
  "usr/share/man/*",
  "usr/share/locale/*",
  "usr/share/info/*"
]
  .map((path) => `--exclude='./${path}'`)
  .join(" ")

/** An async spawn: a build takes seconds, and the worker thread keeps its other tests' timers meanwhile. */
const runAsync = async (args: ReadonlyArray<string>, cwd: string) => {
  const proc = Bun.spawn([...args], { cwd, stdout: "pipe", stderr: "pipe" })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited
  ])
  if (exitCode !== 0) throw new Error(`${args.join(" ")} failed (exit ${exitCode}): ${stdout}${stderr}`)
  return stdout
}

let build: Promise<string> | undefined
let image: Promise<string> | undefined

/**
 * The folder of the run's production build: `main.js`, its bytecode and the executable `petstore`,
 * as `npm run build` writes them (scripts/build.ts).
 */
export const builtFolder = (): Promise<string> =>
  build ??= oncePerRun("build", async (folder) => {
    await runAsync(["bun", "scripts/build.ts", join(folder, "build.partial")], root)
    renameSync(join(folder, "build.partial"), join(folder, "build"))
  }).then((folder) => join(folder, "build"))

/** The absolute path of the run's `petstore` executable, built once per run. */
export const builtExecutable = async (): Promise<string> => join(await builtFolder(), "petstore")

/** Podman, runc and debootstrap from Debian's packages, installed by the set-up step. */
const ensureContainerTools = () =>
  requireDebianPackages(["/usr/bin/podman", "/usr/sbin/runc", "/usr/sbin/debootstrap"], [
    "podman",
    "runc",
    "debootstrap"
  ])

/**
 * `debian:bookworm-slim`, made from Debian's packages when it is not there (no registry is reached
 * here): debootstrap's minimal system, kept between runs, imported with the settings of Debian's
 * own image.
 */
const ensureBaseImage = async () => {
  if (spawnSync("podman", ["image", "exists", baseImage]).status === 0) return
  if (!existsSync(join(rootfsCache, "etc", "debian_version"))) {
    // Made aside and renamed: an interrupted debootstrap leaves no half system in the cache.
    const partial = `${rootfsCache}.partial-${process.pid}`
    rmSync(partial, { recursive: true, force: true })
    mkdirSync(partial, { recursive: true })
    await runAsync(["debootstrap", "--variant=minbase", "bookworm", partial], root).catch((error) => {
      rmSync(partial, { recursive: true, force: true })
      throw error
    })
    rmSync(rootfsCache, { recursive: true, force: true })
    renameSync(partial, rootfsCache)
  }
  await runAsync([
    "bash",
    "-c",
    `set -eo pipefail; tar -C "$1" ${slimExcludes} -c . | podman import --change "$2" --change "$3" - "$4"`,
    "import",
    rootfsCache,
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "CMD [\"bash\"]",
    baseImage
  ], root)
}

/**
 * The name of the run's container image, built once per run from the repository's `Containerfile`
 * with the run's executable as `dist/petstore`; removed at the run's end.
 */
export const builtImage = async (): Promise<string> => {
  image ??= (async () => {
    const petstore = await builtExecutable()
    const folder = await oncePerRun("image", async (folder) => {
      ensureContainerTools()
      await ensureBaseImage()
      // A context of its own: the checkout's `dist` may be another build, or being switched.
      const context = join(folder, "image-context")
      mkdirSync(join(context, "dist"), { recursive: true })
      try {
        linkSync(petstore, join(context, "dist", "petstore"))
      } catch {
        copyFileSync(petstore, join(context, "dist", "petstore"))
      }
      const name = `localhost/petstore-test:${basename(folder).toLowerCase()}`
      writeFileSync(join(folder, imageNameFile), name)
      await runAsync(["podman", "build", "--quiet", "-f", join(root, "Containerfile"), "-t", name, context], root)
      rmSync(context, { recursive: true, force: true })
    }, 900_000)
    return readFileSync(join(folder, imageNameFile), "utf8").trim()
  })()
  return image
}
