/**
 * The production build (`bun run build`): src/bin/main.ts as one bundle with Bun's bytecode beside it,
 * in dist/ or the folder given as the first argument.
 */
import type { BunPlugin } from "bun"

const outdir = process.argv[2] ?? "dist"

/**
 * @effect/platform embeds Scalar's script as a string that ends with its CDN's
 * `//# sourceMappingURL=/sm/….map`. Bun reads that line in the bundle as the bundle's own source
 * map and warns at every start that it cannot decode it; the page has no use for it either.
 */
const withoutScalarSourceMapUrl: BunPlugin = {
  name: "without Scalar's source map URL",
  setup(build) {
    build.onLoad({ filter: /[\\/]@effect[\\/]platform[\\/]dist[\\/]esm[\\/]internal[\\/]httpApiScalar\.js$/ }, async ({ path }) => {
      const source = await Bun.file(path).text()
      const stripped = source.replace(/\\n\/\/# sourceMappingURL=\/sm\/[0-9a-f]+\.map/, "")
      if (stripped === source) throw new Error(`${path}: Scalar's source map URL was not found; check the build`)
      return { contents: stripped, loader: "js" }
    })
  }
}

const result = await Bun.build({
  entrypoints: ["src/bin/main.ts"],
  target: "bun",
  outdir,
  minify: { syntax: true, whitespace: true },
  bytecode: true,
  plugins: [withoutScalarSourceMapUrl]
})
for (const log of result.logs) console.error(log)
if (!result.success) process.exit(1)
for (const output of result.outputs) {
  console.log(`  ${output.path}  ${(output.size / 1e6).toFixed(2)} MB  (${output.kind})`)
}
