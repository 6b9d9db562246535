import { describe, expect, it } from "@effect/vitest"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import packageJson from "../package.json" with { type: "json" }

const root = new URL("..", import.meta.url).pathname

/** Effect 3's packages: their parts moved into `effect` 4 or have no 4.x that loads on it. */
const effect3Packages = [
  "@effect/platform",
  "@effect/platform-bun",
  "@effect/platform-node",
  "@effect/platform-node-shared",
  "@effect/sql",
  "@effect/sql-sqlite-bun",
  "@effect/cli",
  "@effect/experimental",
  "@effect/printer",
  "@effect/printer-ansi",
  "@effect/schema",
  "@effect/opentelemetry"
]

/** Every TypeScript file of the project's own (sources, tests, scripts), relative to the root. */
const projectFiles = ["src", "test", "scripts"].flatMap((folder) =>
  readdirSync(join(root, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => join(entry.parentPath, entry.name).slice(root.length))
)

/** The modules a file imports or re-exports, statically or dynamically. */
const importsOf = (text: string) =>
  [...text.matchAll(
    /(?:^|[\s;])(?:import|export)\s[^"'`;]*?from\s*["']([^"']+)["']|(?:^|[\s;(])import\s*\(?\s*["']([^"']+)["']/gm
  )]
    .map((match) => match[1] ?? match[2]!)

/** The package a module specifier names (`@scope/name` or `name`), or undefined for a relative path or a runtime's own. */
const packageOf = (specifier: string) =>
  specifier.startsWith(".") || /^(node|bun):/.test(specifier) || specifier === "bun"
    ? undefined
    : specifier.split("/").slice(0, specifier.startsWith("@") ? 2 : 1).join("/")

describe("packaging", () => {
  it("gives the client and the API definition their own entry points", () => {
    expect(packageJson.exports).toEqual({ "./client": "./src/client.ts", "./api": "./src/Api.ts" })
  })

  it("depends on effect 4 and its 4.x packages only, each at an exact version, and the lockfile holds no Effect 3 package", () => {
    const dependencies: Record<string, string> = { ...packageJson.dependencies, ...packageJson.devDependencies }
    // The language service is the editor's and tsc's tool, versioned on its own.
    const tool = "@effect/language-service"
    for (const [name, version] of Object.entries(dependencies)) expect(version, name).toMatch(/^\d+\.\d+\.\d+$/)
    expect(packageJson.dependencies.effect).toBe("4.1.0")
    const effectPackages = Object.keys(dependencies).filter((name) => name.startsWith("@effect/") && name !== tool)
    expect(effectPackages.sort()).toEqual(["@effect/sql-pg", "@effect/vitest"])
    for (const name of effectPackages) expect(dependencies[name], name).toMatch(/^4\./)
    for (const name of effect3Packages) expect(dependencies, name).not.toHaveProperty(name)

    // bun.lock names every installed package as `"name": ["name@version", …]`.
    const locked = [
      ...readFileSync(join(root, "bun.lock"), "utf8").matchAll(/^\s+"([^"]+)": \["(?:@?[^@"]+)@([^"]+)"/gm)
    ]
      .map(([, name, version]) => ({ name: name!, version: version! }))
    expect(locked.find((entry) => entry.name === "effect")?.version).toBe("4.1.0")
    expect(locked.filter((entry) => effect3Packages.includes(entry.name))).toEqual([])
    expect(
      locked.filter((entry) =>
        entry.name.startsWith("@effect/") && entry.name !== "@effect/language-service" &&
        !entry.version.startsWith("4.")
      )
    ).toEqual([])
  })

  it("no file imports an Effect 3 package or a library's internal modules; only the move imports pg in src/", () => {
    const offending: Array<string> = []
    for (const file of projectFiles) {
      for (const specifier of importsOf(readFileSync(join(root, file), "utf8"))) {
        const name = packageOf(specifier)
        if (name === undefined) continue
        if (effect3Packages.includes(name)) offending.push(`${file}: ${specifier}`)
        // Internal modules: a package's own folders, or whatever it marks internal.
        if (/\/(dist|src|build|internal)(\/|$)/.test(specifier.slice(name.length))) {
          offending.push(`${file}: ${specifier}`)
        }
        // The `db` move's COPY is pg's only use in the service; every statement else runs on effect/sql.
        if ((name === "pg" || name === "pg-copy-streams") && file.startsWith("src/") && !file.startsWith("src/Move/")) {
          offending.push(`${file}: ${specifier}`)
        }
      }
    }
    expect(offending).toEqual([])
    // The scan sees imports at all: this file's own.
    expect(importsOf(readFileSync(join(root, "test/Packaging.test.ts"), "utf8"))).toContain("@effect/vitest")
  })

  it("the client bundles for browsers with only the API, the client and the domain, and no SQL, server or Bun code", async () => {
    const out = mkdtempSync(join(tmpdir(), "petstore-bundle-"))
    try {
      const build = Bun.spawnSync(
        ["bun", "build", "src/client.ts", "--target=browser", "--sourcemap=external", "--outdir", out],
        { cwd: root }
      )
      expect(build.exitCode, build.stderr.toString()).toBe(0)
      const sources: Array<string> = JSON.parse(readFileSync(join(out, "client.js.map"), "utf8")).sources
      expect(sources.some((source) => source.includes("src/Client/PetStoreClient.ts"))).toBe(true)
      const ownServerCode = sources.filter((source) =>
        !source.includes("node_modules/") && /src\//.test(source) &&
        !/src\/(client\.ts|Api\.ts|Api\/|Client\/|Domain\/)/.test(source)
      )
      expect(ownServerCode).toEqual([])
      const libraries = sources.filter((source) =>
        /bun:sqlite|@effect\/sql|@effect\/platform|node_modules\/pg|node_modules\/effect\/dist\/(sql|cli|observability|persistence)\//
          .test(source)
      )
      expect(libraries).toEqual([])
      expect(readFileSync(join(out, "client.js"), "utf8")).not.toContain("bun:sqlite")
    } finally {
      rmSync(out, { recursive: true, force: true })
    }
  })
})
