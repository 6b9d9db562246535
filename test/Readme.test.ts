import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"

const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8")

describe("README", () => {
  it("the paging example takes each next page's URL from the Link header and walks every page", async () => {
    const loop = /^URL='http:\/\/localhost:3000\/v1\/pets\?[^\n]*\nwhile [\s\S]*?\ndone$/m.exec(readme)?.[0]
    expect(loop).toBeDefined()
    using folder = temporaryFolder()
    const env = { DATABASE_URL: join(folder.path, "petstore.db") }
    const server = await startServer(env)
    try {
      const key = (await runCommand(["src/keys.ts", "create", "--name", "readme"], env)).stdout.trim().split("\n").at(-1)!
      for (const [name, status] of [["A", "available"], ["B", "sold"], ["C", "available"], ["D", "available"], ["E", "available"], ["F", "available"]]) {
        const created = await fetch(`${server.url}/v1/pets`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ name, categoryId: 1, status })
        })
        expect(created.status).toBe(201)
      }
      const run = Bun.spawn(["sh", "-c", loop!.replaceAll("http://localhost:3000", server.url)], {
        cwd: folder.path,
        env: { ...process.env, KEY: key },
        stdout: "pipe",
        stderr: "pipe"
      })
      const [stdout, stderr] = await Promise.all([new Response(run.stdout).text(), new Response(run.stderr).text()])
      expect(await run.exited, stderr).toBe(0)
      const pages = stdout.trim().split("\n").map((line) => JSON.parse(line).map((pet: { name: string }) => pet.name))
      expect(pages).toEqual([["A", "C"], ["D", "E"], ["F"]])
    } finally {
      await server.stop()
    }
  })
})
