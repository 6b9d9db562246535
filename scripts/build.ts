/**
 * The production build (`bun run build`): src/bin/main.ts as one bundle with Bun's bytecode beside it,
 * and `petstore`, one executable holding Bun and src/bin/petstore.ts (the service and its command
 * lines), in dist/ or the folder given as the first argument. With `--no-executable` (`npm start`),
 * the bundle alone.
 */
import type { BunPlugin } from "bun"
import { join } from "node:path"

const args = process.argv.slice(2)
const withExecutable = !args.includes("--no-executable")
const outdir = args.find((arg) => !arg.startsWith("--")) ?? "dist"
const root = join(import.meta.dir, "..")

/**
 * One library file's text changed as it is bundled; the build fails if `pattern` is no longer
 * there, so that an upgrade that moves it is seen at once rather than at the next start.
 */
const edited = (name: string, file: RegExp, pattern: RegExp, replacement: string): BunPlugin => ({
  name,
  setup(build) {
    build.onLoad({ filter: file }, async ({ path }) => {
      const source = await Bun.file(path).text()
      const changed = source.replace(pattern, replacement)
      if (changed === source) throw new Error(`${path}: ${pattern} was not found (${name}); check the build`)
      return { contents: changed, loader: "js" }
    })
  }
})

const plugins = [
  /**
   * effect/http-api embeds Scalar's script (HttpApiScalar's page) as a string that ends with its CDN's
   * `//# sourceMappingURL=/sm/….map`. Bun reads that line in the bundle as the bundle's own source
   * map and warns at every start that it cannot decode it; the page has no use for it either.
   */
  edited(
    "without Scalar's source map URL",
    /[\\/]effect[\\/]dist[\\/]http-api[\\/]internal[\\/]httpApiScalar\.js$/,
    /\\n\/\/# sourceMappingURL=\/sm\/[0-9a-f]+\.map/,
    ""
  ),
  /**
   * Bun writes bytecode only for a CommonJS bundle (ESM bytecode needs `compile`), where
   * `import.meta` is a syntax error at load. Its one use is `ConfigProvider.fromEnv`'s
   * `import.meta?.env`, which it spreads over `process.env`: under Bun the same variables.
   */
  edited(
    "without import.meta in ConfigProvider.fromEnv",
    /[\\/]effect[\\/]dist[\\/]ConfigProvider\.js$/,
    /\.\.\.import\.meta\?\.env/,
    ""
  )
]

const result = await Bun.build({
  entrypoints: ["src/bin/main.ts"],
  target: "bun",
  outdir,
  minify: { syntax: true, whitespace: true },
  bytecode: true,
  plugins
})
for (const log of result.logs) console.error(log)
if (!result.success) process.exit(1)
for (const output of result.outputs) {
  console.log(`  ${output.path}  ${(output.size / 1e6).toFixed(2)} MB  (${output.kind})`)
}
// Bun leaves the bytecode out, saying nothing, when the bundle does not compile as CommonJS.
if (!result.outputs.some((output) => output.kind === "bytecode")) {
  console.error(
    "The build wrote no bytecode: the bundle does not load as CommonJS (look for import.meta or a top-level await)."
  )
  process.exit(1)
}

if (withExecutable) {
  const { version } = await Bun.file(join(root, "package.json")).json() as { version: string }
  const git = Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], { cwd: root, stderr: "ignore" })
  const commit = git.exitCode === 0 ? git.stdout.toString().trim() : "unknown"
  const executable = await Bun.build({
    entrypoints: ["src/bin/petstore.ts"],
    target: "bun",
    // ESM: a compiled executable keeps bytecode for it, and the entry awaits the command it loads.
    format: "esm",
    minify: { syntax: true, whitespace: true },
    bytecode: true,
    plugins,
    define: { PETSTORE_BUILD: JSON.stringify(`petstore ${version} (commit ${commit})`) },
    compile: {
      outfile: join(outdir, "petstore"),
      // Configured by its environment only: a `.env` or `bunfig.toml` in the folder it starts in is not read.
      autoloadDotenv: false,
      autoloadBunfig: false
    }
  })
  for (const log of executable.logs) console.error(log)
  if (!executable.success) process.exit(1)
  for (const output of executable.outputs) {
    console.log(
      `  ${output.path}  ${
        (Bun.file(output.path).size / 1e6).toFixed(2)
      } MB  (executable, ${version}, commit ${commit})`
    )
  }
}
