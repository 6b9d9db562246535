/**
 * The production build (`bun run build`): src/bin/main.ts as one bundle with Bun's bytecode beside it,
 * in dist/ or the folder given as the first argument.
 */
import type { BunPlugin } from "bun"

const outdir = process.argv[2] ?? "dist"

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
  console.error("The build wrote no bytecode: the bundle does not load as CommonJS (look for import.meta or a top-level await).")
  process.exit(1)
}
