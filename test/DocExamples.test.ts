import { describe, expect, it } from "@effect/vitest"
import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { startServer, temporaryFolder } from "./support/ServerProcess.js"

const root = new URL("..", import.meta.url).pathname
const pages = [
  "README.md",
  ...readdirSync(join(root, "docs")).filter((name) => name.endsWith(".md")).sort().map((name) => `docs/${name}`)
]
const documented = "http://localhost:3000"

interface Example {
  readonly line: number
  readonly script: string
  readonly expected: string
}

const fence = /^```([^\n`]*)\n([\s\S]*?)^```[ \t]*$/gm

/** The page's ```sh example blocks, each with the ```text block right after it (none: it prints nothing). */
const examplesOf = (markdown: string): ReadonlyArray<Example> => {
  const blocks = [...markdown.matchAll(fence)].map((match) => ({
    info: match[1]!.trim(),
    body: match[2]!,
    start: match.index!,
    end: match.index! + match[0].length
  }))
  return blocks.flatMap((block, index) => {
    if (block.info !== "sh example") return []
    const next = blocks[index + 1]
    const output = next !== undefined && next.info === "text" && markdown.slice(block.end, next.start).trim() === ""
      ? next.body
      : ""
    return [{ line: markdown.slice(0, block.start).split("\n").length, script: block.body, expected: output }]
  })
}

const normalise = (text: string) =>
  text.replaceAll("\r\n", "\n").split("\n").map((line) => line.trimEnd()).join("\n").replace(/\n+$/, "")

/** `…` in the page's output stands for any characters within one line (ids, times, keys, cursors). */
const pattern = (expected: string) =>
  new RegExp(`^${expected.split("…").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("[^\\n]*?")}$`)

const matches = (expected: string, actual: string) => pattern(normalise(expected)).test(normalise(actual))

/** The page's output with each `…` line that matches its counterpart replaced by it, so a failure's diff shows only the drift. */
const comparable = (expected: string, actual: string) => {
  const actualLines = normalise(actual).split("\n")
  return normalise(expected).split("\n").map((line, index) =>
    line.includes("…") && actualLines[index] !== undefined && pattern(line).test(actualLines[index])
      ? actualLines[index]
      : line
  ).join("\n")
}

const separator = "----- end of example -----"

/** Runs a page's examples in order in one shell (so a KEY set by one is seen by the next) against a fresh server. */
const runPage = async (examples: ReadonlyArray<Example>) => {
  using folder = temporaryFolder()
  const database = join(folder.path, "petstore.db")
  // PUBLIC_BASE_URL is left to its default, http://localhost:PORT, so that links in answers lead back here.
  const server = await startServer({ DATABASE_URL: database })
  const ownUrls = [server.url, server.url.replace("127.0.0.1", "localhost")]
  try {
    // `npm run …` in an example runs this repository's scripts, from the temporary folder.
    const bin = join(folder.path, "bin")
    const npm = Bun.which("npm")!
    Bun.spawnSync(["mkdir", bin])
    writeFileSync(join(bin, "npm"), `#!/bin/sh\ncd '${root}' && exec '${npm}' "$@"\n`)
    chmodSync(join(bin, "npm"), 0o755)
    const script = [
      "exec 2>&1",
      ...examples.map((example) =>
        `${example.script.replaceAll(documented, server.url)}\nprintf '\\n%s\\n' '${separator}'`
      )
    ].join("\n")
    const env: Record<string, string | undefined> = {
      ...process.env,
      PATH: `${bin}:${process.env.PATH}`,
      DATABASE_URL: database
    }
    for (const name of ["PETSTORE_ENV", "PORT", "PUBLIC_BASE_URL", "KEY", "PETSTORE_API_KEY", "NO_COLOR"]) {
      delete env[name]
    }
    // The command-line client's default address, http://localhost:3000, stands for this server as it does in the text.
    env.PETSTORE_BASE_URL = server.url
    const run = Bun.spawn(["sh", "-c", script], { cwd: folder.path, env, stdout: "pipe", stderr: "pipe" })
    const output = await new Response(run.stdout).text()
    await run.exited
    return ownUrls.reduce((text, url) => text.replaceAll(url, documented), output).split(`\n${separator}\n`)
  } finally {
    await server.stop()
  }
}

describe("documentation examples", () => {
  for (const page of pages) {
    const examples = examplesOf(readFileSync(join(root, page), "utf8"))
    if (examples.length === 0) continue
    it(`${page}: every example prints what the page shows, on a fresh server`, { timeout: 180_000 }, async () => {
      const outputs = await runPage(examples)
      examples.forEach((example, index) => {
        const actual = outputs[index] ?? "(the examples stopped before this one)"
        // On a mismatch, the diff between the page and the real output names the example's line.
        if (!matches(example.expected, actual)) {
          expect(normalise(actual), `${page}:${example.line}`).toBe(comparable(example.expected, actual))
        }
      })
    })
  }

  it("the README is a front page of at most 150 lines, and a newcomer's first request is on it", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8")
    expect(readme.split("\n").length).toBeLessThanOrEqual(150)
    expect(examplesOf(readme).length).toBeGreaterThan(0)
  })

  it("the command-line client the README's commands list shows is run by one of its examples, as written", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8")
    const listed = [...readme.matchAll(/^(npm run --silent petstore -- .*?)\s+#/gm)].map((match) => match[1]!)
    expect(listed).not.toEqual([])
    for (const command of listed) {
      expect(examplesOf(readme).some((example) => example.script.split("\n").includes(command)), command).toBe(true)
    }
  })

  it("links from the pages point at files in the repository, and nothing names a file outside it", () => {
    for (const page of pages) {
      const text = readFileSync(join(root, page), "utf8")
      for (const [, target] of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue
        const path = join(root, dirname(page), target!)
        expect(existsSync(path) && !relative(root, path).startsWith(".."), `${page} links to ${target}`).toBe(true)
      }
      expect(text, page).not.toMatch(/shared\/spec|\/work\//)
    }
  })

  it("the matcher takes … for any characters in a line, and nothing else", () => {
    expect(matches("x-request-id: …\nok", "x-request-id: 1f2e\nok")).toBe(true)
    expect(matches("[{\"id\":1}]", "[{\"id\":2}]")).toBe(false)
    expect(matches("a …\nb", "a x\nc\nb")).toBe(false)
    expect(examplesOf("```sh example\necho hi\n```\n\n```text\nhi\n```\n")).toEqual([{
      line: 1,
      script: "echo hi\n",
      expected: "hi\n"
    }])
  })
})
