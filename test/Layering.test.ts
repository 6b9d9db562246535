import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"

/**
 * The layers of src/, lowest first. A part (a folder of src/, or a file at its root) may import its
 * own files and any part on a lower line; never a part on its own line or above. `Api.ts` belongs
 * to `Api`, with the definitions it composes. A new folder needs a line here before it is used.
 */
const layers: ReadonlyArray<ReadonlyArray<string>> = [
  ["Domain", "Observability"],
  ["Config"],
  ["Sql"],
  ["Api", "Request"],
  ["Client", "CommandLine"],
  ["Auth", "Move", "Pets"],
  ["Health"],
  ["Http", "Service"],
  ["bin", "client.ts"]
]

/** What the client's entry point may reach: the API definition and no server code. */
const clientParts = ["Api", "Client", "Domain"]

const root = join(import.meta.dirname, "..")
const src = join(root, "src")

const rankOf = new Map(layers.flatMap((parts, rank) => parts.map((part) => [part, rank] as const)))

const partOf = (file: string): string => {
  const path = relative(src, file)
  const first = path.split("/")[0]!
  return path === "Api.ts" ? "Api" : first
}

const sources = readdirSync(src, { recursive: true, withFileTypes: true })
  .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
  .map((entry) => join(entry.parentPath, entry.name))
  .sort()

// `import … from "…"`, `export … from "…"`, `import "…"` and `import("…")`.
const fromImport = /^\s*(?:import|export)\b[^"'`;]*?\bfrom\s*["']([^"']+)["']/gm
const bareImport = /^\s*import\s*["']([^"']+)["']/gm
const dynamicImport = /\bimport\(\s*["']([^"']+)["']\s*\)/g

/** The files of src/ that `file` imports, by relative path. */
const importsOf = (file: string): Array<string> => {
  const text = readFileSync(file, "utf8")
  const specifiers = [fromImport, bareImport, dynamicImport].flatMap((pattern) => [...text.matchAll(pattern)]).map((
    match
  ) => match[1]!)
  return specifiers
    .filter((specifier) => specifier.startsWith("."))
    .map((specifier) => resolve(dirname(file), specifier).replace(/\.js$/, ".ts"))
}

const graph = new Map(sources.map((file) => [file, importsOf(file)]))
const show = (file: string) => relative(root, file)

describe("the folders of src/ depend one way", () => {
  it("reads the imports (the parser finds what the entry point imports)", () => {
    expect(graph.get(join(src, "bin/main.ts"))).toContain(join(src, "Http/Server.ts"))
  })

  it("places every source file in a layer", () => {
    expect(sources.filter((file) => !rankOf.has(partOf(file))).map(show)).toEqual([])
  })

  it("imports only files that exist", () => {
    const known = new Set(sources)
    const missing = [...graph].flatMap(([file, imports]) =>
      imports.filter((target) => !known.has(target)).map((target) => `${show(file)} → ${show(target)}`)
    )
    expect(missing).toEqual([])
  })

  it("imports nothing on a part's own line or above", () => {
    const against = [...graph].flatMap(([file, imports]) =>
      imports.flatMap((target) => {
        const from = partOf(file)
        const to = partOf(target)
        if (from === to || rankOf.get(to)! < rankOf.get(from)!) return []
        return [`${show(file)} → ${show(target)} (${from} may not import ${to})`]
      })
    )
    expect(against).toEqual([])
  })

  it("has no cycle between parts", () => {
    const edges = new Map<string, Set<string>>()
    for (const [file, imports] of graph) {
      for (const target of imports) {
        const from = partOf(file)
        const to = partOf(target)
        if (from !== to) edges.set(from, (edges.get(from) ?? new Set()).add(to))
      }
    }
    const cycles = new Set<string>()
    const visit = (part: string, path: ReadonlyArray<string>) => {
      if (path.includes(part)) {
        const cycle = path.slice(path.indexOf(part))
        // Each cycle once, from its first part in alphabetical order.
        const start = cycle.indexOf([...cycle].sort()[0]!)
        const rotated = [...cycle.slice(start), ...cycle.slice(0, start)]
        cycles.add([...rotated, rotated[0]].join(" → "))
        return
      }
      for (const next of edges.get(part) ?? []) visit(next, [...path, part])
    }
    for (const part of edges.keys()) visit(part, [])
    expect([...cycles]).toEqual([])
  })

  it("keeps server code out of the client and the API definition", () => {
    const reached = (start: string) => {
      const seen = new Set<string>()
      const walk = (file: string) => {
        if (seen.has(file)) return
        seen.add(file)
        for (const target of graph.get(file) ?? []) walk(target)
      }
      walk(start)
      return [...seen]
    }
    expect(
      reached(join(src, "client.ts")).filter((file) => !["client.ts", ...clientParts].includes(partOf(file))).map(show)
    )
      .toEqual([])
    expect(reached(join(src, "Api.ts")).filter((file) => !["Api", "Domain"].includes(partOf(file))).map(show)).toEqual(
      []
    )
  })
})
